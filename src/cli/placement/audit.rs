//! `ocifit placement audit`: the running pods a PlacementPolicy selects whose node's platform is
//! not among their images' platforms, or whose images' platforms are unknown, each with the
//! reason. Reads the policies, namespaces, nodes and running pods with the user's kubeconfig,
//! each image (by the digest its node ran, when the runtime reports one) once from its registry
//! with the user's credentials, and decides with the controller's own functions
//! ([`crate::placement::audit`]). Exit status 0 when nothing is misplaced, 1 when something is,
//! 2 when the audit could not be made.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kube::Client;

use crate::placement::{AuditRegistry, AuditReport, audit_cluster};
use crate::registry::{DockerConfig, RegistryOptions};

/// Exit status when some pod is misplaced (the report is still printed).
pub const EXIT_MISPLACED: u8 = 1;
/// Exit status when the audit could not be made.
pub const EXIT_FAILED: u8 = 2;

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

/// Runs the audit and prints its report.
pub async fn run(client: Client, args: &AuditArgs) -> ExitCode {
    let registry = match registry(args) {
        Ok(registry) => registry,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    match audit_cluster(client, &args.own_namespace, &registry).await {
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

/// The registry access the flags ask for.
fn registry(args: &AuditArgs) -> Result<AuditRegistry, String> {
    let mut options = RegistryOptions::default();
    if let Some(path) = &args.docker_config {
        options.credentials = DockerConfig::from_json(&read(path)?)
            .map_err(|err| format!("{}: {err}", path.display()))?;
    }
    if let Some(path) = &args.ca_file {
        options.extra_ca_pem.push(read(path)?);
    }
    Ok(AuditRegistry {
        options,
        plain_http: args.plain_http,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|err| format!("failed to read {}: {err}", path.display()))
}
