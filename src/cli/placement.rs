//! `ocifit placement release-all`: the way out (see `docs/placement.md`), runnable with nothing
//! but a kubeconfig, whether ocifit runs or not.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::placement::way_out::release_all;

/// `ocifit placement`'s commands.
#[derive(Debug, clap::Args)]
pub struct PlacementArgs {
    #[command(subcommand)]
    pub command: PlacementCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PlacementCommand {
    /// Remove ocifit's scheduling gate from every pod that still has it (any other gate stays):
    /// the pods are then scheduled without a platform constraint, as without ocifit.
    ReleaseAll {
        /// The kubeconfig; else $KUBECONFIG, ~/.kube/config or the in-cluster service account.
        #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
    },
}

/// Runs the command; exit 0 when every gated pod was released, 1 otherwise (every pod that could
/// be released still is, and each failure is reported).
pub async fn run(args: &PlacementArgs) -> ExitCode {
    let PlacementCommand::ReleaseAll { kubeconfig } = &args.command;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match crate::startup::kube_client(kubeconfig.as_deref()).await {
        Ok(client) => client,
        Err(err) => {
            eprintln!("error: {err:#}");
            return ExitCode::from(1);
        }
    };
    match release_all(client).await {
        Ok(released) => {
            for pod in &released.pods {
                println!("released {pod}");
            }
            for failure in &released.failed {
                eprintln!("error: {}", crate::telemetry::error_chain(failure));
            }
            println!("{} pod(s) released", released.pods.len());
            if released.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                eprintln!("{} pod(s) could not be released", released.failed.len());
                ExitCode::from(1)
            }
        }
        Err(err) => {
            eprintln!("error: {}", crate::telemetry::error_chain(&err));
            ExitCode::from(1)
        }
    }
}
