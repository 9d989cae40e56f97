//! `ocifit placement audit`: the running pods a PlacementPolicy selects whose node's platform is
//! not among their images' platforms, or whose images' platforms are unknown, each with the
//! reason. Reads the policies, namespaces, nodes and running pods with the user's kubeconfig,
//! each image (by the digest its node ran, when the runtime reports one) once from its registry
//! with the user's credentials, and decides with the controller's own functions
//! ([`crate::placement::audit`]). Exit status by docs/cli.md's table: 1 when something is
//! misplaced.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::exit::Exit;
use crate::cli::output::OutputArgs;
use crate::cli::resolve::RegistryAccessArgs;
use crate::placement::{AuditError, AuditRegistry, AuditReport, audit_cluster};
use crate::registry::{DockerConfig, RegistryOptions};
use crate::startup::KubeArgs;

/// `ocifit placement audit`'s flags: the registry flags reach every image's registry.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("plain_http", |arg| arg.help("Reach the images' registries over plain HTTP")),
    mut_arg("docker_config", |arg| arg.help(
        "A docker config (`~/.docker/config.json` or a dockerconfigjson) with credentials for \
         the images' registries (the pods' pull Secrets are not read)"
    )),
    mut_arg("ca_file", |arg| arg.help("A PEM file of extra CA certificates to trust")),
)]
pub struct AuditArgs {
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub registry: RegistryAccessArgs,
    /// ocifit's own namespace, whose pods placement never selects.
    #[arg(long, value_name = "NAMESPACE", default_value = "ocifit-system")]
    pub own_namespace: String,
}

/// Runs the audit and prints its report: [`Exit::Ok`] when nothing is misplaced,
/// [`Exit::Failed`] when something is (the report is printed all the same).
pub(super) async fn run(kube: &KubeArgs, args: &AuditArgs) -> ExitCode {
    let registry = match registry(args) {
        Ok(registry) => registry,
        Err(err) => {
            eprintln!("error: {err}");
            return Exit::Usage.into();
        }
    };
    let client = match crate::cli::connect(kube).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    match audit_cluster(client, &args.own_namespace, &registry).await {
        Ok(report) => {
            args.output.output.print(&report, table);
            if report.misplaced.is_empty() {
                Exit::Ok.into()
            } else {
                Exit::Failed.into()
            }
        }
        Err(err) => {
            eprintln!("error: {}", crate::telemetry::error_chain(&err));
            match &err {
                AuditError::List { source, .. } => Exit::of_kube(source),
                // The client could not be built from the flags (a bad CA file).
                AuditError::Registry(_) => Exit::Usage,
            }
            .into()
        }
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

/// The registry access the flags ask for.
fn registry(args: &AuditArgs) -> Result<AuditRegistry, String> {
    let mut options = RegistryOptions::default();
    if let Some(path) = &args.registry.docker_config {
        options.credentials = DockerConfig::from_json(&read(path)?)
            .map_err(|err| format!("{}: {err}", path.display()))?;
    }
    if let Some(path) = &args.registry.ca_file {
        options.extra_ca_pem.push(read(path)?);
    }
    Ok(AuditRegistry {
        options,
        plain_http: args.registry.plain_http,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|err| format!("failed to read {}: {err}", path.display()))
}
