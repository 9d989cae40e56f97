//! `ocifit placement release-all` and `ocifit placement untaint`: the way out (see
//! `docs/placement.md`), runnable with nothing but a kubeconfig, whether ocifit runs or not; and
//! `ocifit placement audit` ([`audit`]): the running pods on the wrong platform.

mod audit;

use std::process::ExitCode;

use crate::placement::{GATE, untaint_all};

/// `ocifit placement`'s commands.
#[derive(Debug, clap::Args)]
pub struct PlacementArgs {
    /// Which cluster (the flags are accepted after the command too).
    #[command(flatten)]
    pub kube: crate::startup::KubeArgs,
    #[command(subcommand)]
    pub command: PlacementCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PlacementCommand {
    /// Remove ocifit's scheduling gate from every pod that still has it (any other gate stays):
    /// the pods are then scheduled without a platform constraint, as without ocifit.
    ReleaseAll,
    /// Remove ocifit's node-tainting taint (`placement.ocifit.io/arch`) from every node (any
    /// other taint stays). While ocifit runs with a policy that taints, it taints again.
    Untaint,
    /// List the running pods a PlacementPolicy selects whose node's platform is not among their
    /// images' platforms, or whose images' platforms are unknown, each with the reason, and the
    /// registry requests made. Exit 1 when some pod is misplaced.
    Audit(audit::AuditArgs),
}

/// Runs the command; exit 0 when every gated pod (tainted node) was released (untainted), 1
/// otherwise (every other one still is, and each failure is reported).
pub async fn run(args: &PlacementArgs) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match crate::startup::kube_client(&args.kube).await {
        Ok(client) => client,
        Err(err) => {
            eprintln!("error: {err:#}");
            return ExitCode::from(1);
        }
    };
    match &args.command {
        PlacementCommand::ReleaseAll => release(client).await,
        PlacementCommand::Untaint => untaint(client).await,
        PlacementCommand::Audit(audit) => audit::run(client, audit).await,
    }
}

async fn untaint(client: kube::Client) -> ExitCode {
    match untaint_all(client).await {
        Ok(untainted) => {
            for node in &untainted.nodes {
                println!("untainted {node}");
            }
            for failure in &untainted.failed {
                eprintln!("error: {}", crate::telemetry::error_chain(failure));
            }
            println!("{} node(s) untainted", untainted.nodes.len());
            if untainted.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                eprintln!("{} node(s) could not be untainted", untainted.failed.len());
                ExitCode::from(1)
            }
        }
        Err(err) => {
            eprintln!("error: {}", crate::telemetry::error_chain(&err));
            ExitCode::from(1)
        }
    }
}

async fn release(client: kube::Client) -> ExitCode {
    super::gates::release(client, &[GATE]).await
}
