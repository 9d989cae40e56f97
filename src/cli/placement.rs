//! `ocifit placement untaint` and `ocifit placement release-all` (a deprecated alias of
//! `ocifit release-gates --gate placement`): the way out (see `docs/placement.md`), runnable
//! with nothing but a kubeconfig, whether ocifit runs or not; and `ocifit placement audit`
//! ([`audit`]): the running pods on the wrong platform.

mod audit;

use std::process::ExitCode;

use serde::Serialize;

use super::exit::Exit;
use super::gates::{GateName, release};
use super::output::OutputArgs;
use crate::cluster::Scope;
use crate::placement::untaint_all;
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
    Audit(audit::AuditArgs),
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
        PlacementCommand::Audit(audit) => audit::run(&args.kube, audit).await,
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
