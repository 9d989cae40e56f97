//! The reads behind `ocifit placement audit`: the policies, namespaces, nodes and running pods
//! through the user's kubeconfig, and every image of the selected pods once from its registry (by
//! the digest its node ran, when the runtime reports one), judged by the controller's own
//! decisions ([`super::planner::audit`]). Thin: nothing is decided here.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use crate::api::PlacementPolicy;
use crate::classes::{ARCH_LABEL, OS_LABEL};
use crate::placement::planner::Namespace as SelectedNamespace;
use crate::placement::planner::{Finding, as_run, audited, judge, node};
use crate::placement::planner::{Inspected, Inspection, InspectionFailure, containers};
use crate::placement::planner::{PolicySet, UsablePolicies};
use crate::platform::NodePlatform;
use crate::registry::{
    AllowList, PrivateRegistries, Reference, Registry, RegistryOptions, parse_reference,
};

/// Objects listed per request.
const PAGE: u32 = 500;
/// Images read from registries at once.
const LOOKUPS_AT_ONCE: usize = 16;

/// How the images' registries are reached.
#[derive(Debug, Clone, Default)]
pub struct AuditRegistry {
    /// Credentials and extra CAs; the private registries the images name are allowed.
    pub options: RegistryOptions,
    /// Every image's registry over plain HTTP.
    pub plain_http: bool,
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
    #[error("failed to build the registry client: {0}")]
    Registry(#[from] crate::registry::Error),
}

/// Audits the running pods of the cluster `client` reaches; `own_namespace` is ocifit's.
pub async fn audit_cluster(
    client: Client,
    own_namespace: &str,
    registry: &AuditRegistry,
) -> Result<AuditReport, AuditError> {
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
            if let Some(policy) = audited(&pod, namespace, own_namespace, &policies) {
                selected.push((as_run(&pod), policy.name.clone()));
            }
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params.continue_token = Some(token),
            _ => break,
        }
    }
    let (registry, found) = lookups(registry, &selected).await?;
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
    access: &AuditRegistry,
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
        ..access.options.clone()
    };
    if access.plain_http {
        options.plain_http = references.iter().map(|r| r.registry().to_owned()).collect();
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
