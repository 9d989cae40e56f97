//! `ocifit placement audit`: the running pods a PlacementPolicy selects whose node's platform is
//! not among their images' platforms, or whose images' platforms are unknown, each with the
//! reason. Reads the policies, namespaces, nodes and running pods with the user's kubeconfig,
//! each image (by the digest its node ran, when the runtime reports one) once from its registry
//! with the user's credentials, and decides with the controller's own functions
//! ([`crate::placement::audit`]). Exit status 0 when nothing is misplaced, 1 when something is,
//! 2 when the audit could not be made.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use crate::api::PlacementPolicy;
use crate::classes::grouping::{ARCH_LABEL, OS_LABEL};
use crate::placement::audit::{Finding, as_run, audited, judge, node};
use crate::placement::compiled::{PolicySet, UsablePolicies};
use crate::placement::release::{Inspected, Inspection, InspectionFailure, containers};
use crate::placement::select::Namespace as SelectedNamespace;
use crate::platform::NodePlatform;
use crate::registry::{
    AllowList, DockerConfig, PrivateRegistries, Reference, Registry, RegistryOptions,
    parse_reference,
};

/// Exit status when some pod is misplaced (the report is still printed).
pub const EXIT_MISPLACED: u8 = 1;
/// Exit status when the audit could not be made.
pub const EXIT_FAILED: u8 = 2;
/// Objects listed per request.
const PAGE: u32 = 500;
/// Images read from registries at once.
const LOOKUPS_AT_ONCE: usize = 16;

/// `ocifit placement audit`'s flags.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = AuditOutput::Table)]
    pub output: AuditOutput,
    /// Reach the images' registries over plain HTTP.
    #[arg(long)]
    pub plain_http: bool,
    /// A docker config (`~/.docker/config.json` or a dockerconfigjson) with credentials for
    /// the images' registries (the pods' pull Secrets are not read).
    #[arg(long, value_name = "FILE")]
    pub docker_config: Option<PathBuf>,
    /// A PEM file of extra CA certificates to trust.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// ocifit's own namespace, whose pods placement never selects.
    #[arg(long, value_name = "NAMESPACE", default_value = "ocifit-system")]
    pub own_namespace: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditOutput {
    /// One row per misplaced pod, then the totals.
    Table,
    /// A JSON document.
    Json,
    /// The same document as YAML.
    Yaml,
}

/// What the audit found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// Running pods a policy selects.
    pub audited: usize,
    /// Requests sent to registries.
    pub registry_requests: u64,
    /// The misplaced pods, by namespace and name.
    pub misplaced: Vec<Finding>,
}

/// Why the audit could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("failed to list {what}: {source}")]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("registry options: {0}")]
    Registry(#[from] crate::registry::Error),
    #[error("{0}")]
    Config(#[from] crate::registry::ConfigError),
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Runs the audit and prints its report.
pub async fn run(client: Client, args: &AuditArgs) -> ExitCode {
    match audit(client, args).await {
        Ok(report) => {
            print!("{}", render(&report, args.output));
            if report.misplaced.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_MISPLACED)
            }
        }
        Err(err) => {
            eprintln!("error: {}", crate::telemetry::error_chain(&err));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// The report in the chosen format.
pub fn render(report: &AuditReport, output: AuditOutput) -> String {
    match output {
        // Serializing plain strings and numbers cannot fail.
        AuditOutput::Json => serde_json::to_string_pretty(report).unwrap_or_default() + "\n",
        AuditOutput::Yaml => serde_saphyr::to_string(report).unwrap_or_default(),
        AuditOutput::Table => table(report),
    }
}

fn table(report: &AuditReport) -> String {
    use std::io::Write;
    let mut table = tabwriter::TabWriter::new(Vec::new()).padding(2);
    if !report.misplaced.is_empty() {
        let _ = writeln!(table, "NAMESPACE\tPOD\tNODE\tPOLICY\tREASON\tMESSAGE");
    }
    for found in &report.misplaced {
        let _ = writeln!(
            table,
            "{}\t{}\t{}\t{}\t{}\t{}",
            found.namespace, found.pod, found.node, found.policy, found.reason, found.message
        );
    }
    let rows = table.into_inner().unwrap_or_default();
    format!(
        "{}{} running pod(s) audited, {} misplaced, {} registry request(s)\n",
        String::from_utf8_lossy(&rows),
        report.audited,
        report.misplaced.len(),
        report.registry_requests
    )
}

async fn audit(client: Client, args: &AuditArgs) -> Result<AuditReport, AuditError> {
    let listed = |what| move |source| AuditError::List { what, source };
    let stored = Api::<PlacementPolicy>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(listed("placementpolicies"))?;
    let usable = UsablePolicies::default();
    usable.store(PolicySet::compile(
        stored.items.into_iter().map(std::sync::Arc::new),
    ));
    let policies = usable.load();
    let namespaces: HashMap<String, BTreeMap<String, String>> =
        Api::<Namespace>::all(client.clone())
            .list_metadata(&ListParams::default())
            .await
            .map_err(listed("namespaces"))?
            .items
            .into_iter()
            .map(|namespace| {
                (
                    namespace.name_any(),
                    namespace.metadata.labels.unwrap_or_default(),
                )
            })
            .collect();
    let nodes: HashMap<String, NodePlatform> = Api::<Node>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .map_err(listed("nodes"))?
        .items
        .into_iter()
        .map(|node| {
            let mut labels = node.metadata.labels.clone().unwrap_or_default();
            labels.retain(|key, _| key == OS_LABEL || key == ARCH_LABEL);
            (node.name_any(), NodePlatform::from_labels(&labels))
        })
        .collect();
    let mut selected: Vec<(Pod, String)> = Vec::new();
    let api: Api<Pod> = Api::all(client);
    let mut params = ListParams::default()
        .fields("status.phase=Running")
        .limit(PAGE);
    let empty = BTreeMap::new();
    loop {
        let page = api.list(&params).await.map_err(listed("pods"))?;
        for pod in page.items {
            let name = pod.namespace().unwrap_or_default();
            let namespace = SelectedNamespace {
                name: &name,
                labels: namespaces.get(&name).unwrap_or(&empty),
            };
            if let Some(policy) = audited(&pod, namespace, &args.own_namespace, &policies) {
                selected.push((as_run(&pod), policy.name.clone()));
            }
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params.continue_token = Some(token),
            _ => break,
        }
    }
    let (registry, found) = lookups(args, &selected).await?;
    let mut misplaced = Vec::new();
    for (pod, policy) in &selected {
        let node = node(pod).unwrap_or_default();
        let platform = nodes
            .get(node)
            .cloned()
            .unwrap_or_else(|| NodePlatform::from_labels(&empty));
        let inspections: Vec<Inspection> = pod
            .spec
            .iter()
            .flat_map(containers)
            .map(|container| {
                let image = container.image.clone().unwrap_or_default();
                let result = found
                    .get(&image)
                    .cloned()
                    .unwrap_or_else(|| Err(InspectionFailure::InvalidReference(image.clone())));
                Inspection {
                    container: container.name.clone(),
                    image,
                    result,
                }
            })
            .collect();
        if let Some(why) = judge(node, &platform, &inspections) {
            misplaced.push(Finding::new(pod, policy, &why));
        }
    }
    misplaced.sort_by(|a, b| (&a.namespace, &a.pod).cmp(&(&b.namespace, &b.pod)));
    Ok(AuditReport {
        audited: selected.len(),
        registry_requests: registry.stats().requests,
        misplaced,
    })
}

/// Every image of the selected pods read once from its registry: its digest and platforms, or
/// why not.
async fn lookups(
    args: &AuditArgs,
    selected: &[(Pod, String)],
) -> Result<
    (
        Registry,
        HashMap<String, Result<Inspected, InspectionFailure>>,
    ),
    AuditError,
> {
    let images: BTreeSet<String> = selected
        .iter()
        .filter_map(|(pod, _)| pod.spec.as_ref())
        .flat_map(containers)
        .filter_map(|container| container.image.clone())
        .collect();
    let references: Vec<Reference> = images
        .iter()
        .filter_map(|image| parse_reference(image).ok())
        .collect();
    let mut options = RegistryOptions {
        // The cluster's pods chose these registries, wherever they are.
        private: PrivateRegistries::registries_of(&references.iter().collect::<Vec<_>>()),
        allowed: AllowList::default(),
        ..RegistryOptions::default()
    };
    if args.plain_http {
        options.plain_http = references.iter().map(|r| r.registry().to_owned()).collect();
    }
    if let Some(path) = &args.docker_config {
        options.credentials = DockerConfig::from_json(&read(path)?)?;
    }
    if let Some(path) = &args.ca_file {
        options.extra_ca_pem.push(read(path)?);
    }
    let registry = Registry::new(options)?;
    let found = futures_util::stream::iter(images)
        .map(|image| {
            let registry = registry.clone();
            async move {
                let result = match parse_reference(&image) {
                    Err(err) => Err(InspectionFailure::InvalidReference(err.to_string())),
                    Ok(reference) => registry
                        .image_platforms(&reference)
                        .await
                        .map(|found| Inspected {
                            digest: found.digest,
                            platforms: found.platforms,
                        })
                        .map_err(|err| InspectionFailure::Lookup {
                            image: image.clone(),
                            summary: crate::telemetry::error_chain(&err),
                        }),
                };
                (image, result)
            }
        })
        .buffer_unordered(LOOKUPS_AT_ONCE)
        .collect()
        .await;
    Ok((registry, found))
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, AuditError> {
    std::fs::read(path).map_err(|source| AuditError::Read {
        path: path.to_owned(),
        source,
    })
}
