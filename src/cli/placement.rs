//! `ocifit placement untaint` and `ocifit placement release-all` (a deprecated alias of
//! `ocifit release-gates --gate placement`): the way out (see `docs/placement.md`), runnable
//! with nothing but a kubeconfig, whether ocifit runs or not; and `ocifit placement audit`: the
//! running pods a PlacementPolicy selects whose node's platform is not among their images'
//! platforms (or unknown), each with the reason, read with the user's kubeconfig and
//! credentials and decided by the controller's own functions ([`crate::placement::audit`]).
//! Exit status by docs/cli.md's table: 1 when something is misplaced.

use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

use super::Exit;
use super::OutputArgs;
use super::gates::{GateName, release};
use super::resolve::RegistryAccessArgs;
use crate::cluster::Scope;
use crate::placement::{AuditError, AuditRegistry, AuditReport, audit_cluster, untaint_all};
use crate::registry::{DockerConfig, RegistryOptions};
use crate::startup::KubeArgs;

/// `ocifit placement`'s commands.
#[derive(Debug, clap::Args)]
pub struct PlacementArgs {
    /// Which cluster: the global flags, filled in by `cli::run`.
    #[arg(skip)]
    pub kube: KubeArgs,
    #[command(subcommand)]
    pub command: PlacementCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PlacementCommand {
    /// Deprecated: `ocifit release-gates --gate placement` (the same, with a warning). Removes
    /// ocifit's placement gate from every pod that still has it (any other gate stays).
    ReleaseAll(ReleaseAllArgs),
    /// Remove ocifit's node-tainting taint (`placement.ocifit.io/arch`) from every node (any
    /// other taint stays). While ocifit runs with a policy that taints, it taints again.
    Untaint(OutputArgs),
    /// List the running pods a PlacementPolicy selects whose node's platform is not among their
    /// images' platforms, or whose images' platforms are unknown, each with the reason, and the
    /// registry requests made. Exit 1 when some pod is misplaced.
    Audit(AuditArgs),
}

/// `ocifit placement release-all`'s flags: those of `release-gates`.
#[derive(Debug, clap::Args)]
pub struct ReleaseAllArgs {
    /// List the pods that would be released; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What the deprecated alias says on stderr.
pub const RELEASE_ALL_DEPRECATED: &str = "warning: `ocifit placement release-all` is deprecated \
     and goes in a later release: use `ocifit release-gates --gate placement`";

/// Runs the command; exit 0 when every gated pod (tainted node) was released (untainted),
/// [`Exit::Failed`] otherwise (every other one still is, and each failure is reported).
pub(super) async fn run(args: &PlacementArgs) -> ExitCode {
    match &args.command {
        PlacementCommand::ReleaseAll(flags) => {
            eprintln!("{RELEASE_ALL_DEPRECATED}");
            let scope = Scope {
                namespace: args.kube.namespace.clone(),
                dry_run: flags.dry_run,
            };
            let gates = [GateName::Placement.gate()];
            release(&args.kube, &gates, &scope, flags.output.output).await
        }
        PlacementCommand::Untaint(output) => untaint(&args.kube, output).await,
        PlacementCommand::Audit(audit) => run_audit(&args.kube, audit).await,
    }
}

/// What untainting did, as `-o json|yaml` prints it.
#[derive(Debug, Default, Serialize)]
struct UntaintReport {
    /// Every node untainted.
    untainted: Vec<String>,
    /// Every failure, in a sentence.
    failed: Vec<String>,
}

impl UntaintReport {
    fn table(&self) -> String {
        let mut out: String = self
            .untainted
            .iter()
            .map(|node| format!("untainted {node}\n"))
            .collect();
        out.push_str(&format!("{} node(s) untainted\n", self.untainted.len()));
        out
    }
}

async fn untaint(kube: &KubeArgs, output: &OutputArgs) -> ExitCode {
    let client = match super::connect(kube).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    match untaint_all(client).await {
        Ok(untainted) => {
            let report = UntaintReport {
                untainted: untainted.nodes,
                failed: untainted
                    .failed
                    .iter()
                    .map(|f| crate::telemetry::error_chain(f))
                    .collect(),
            };
            for failure in &report.failed {
                eprintln!("error: {failure}");
            }
            output.output.print(&report, UntaintReport::table);
            if report.failed.is_empty() {
                Exit::Ok.into()
            } else {
                eprintln!("{} node(s) could not be untainted", report.failed.len());
                Exit::Failed.into()
            }
        }
        Err(err) => {
            eprintln!("error: {}", crate::telemetry::error_chain(&err));
            match &err {
                crate::placement::WayOutError::ListNodes(source) => Exit::of_kube(source),
                _ => Exit::Failed,
            }
            .into()
        }
    }
}

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
async fn run_audit(kube: &KubeArgs, args: &AuditArgs) -> ExitCode {
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
            args.output.output.print(&report, audit_table);
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

fn audit_table(report: &AuditReport) -> String {
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
