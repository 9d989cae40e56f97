//! `ocifit release-gates`: removes every scheduling gate ocifit adds (placement's, image
//! selection's and the artifact cache's) from every pod still holding one, leaving any other gate alone — what the
//! chart's uninstall hook runs, so no pod waits on a gate only ocifit would remove. Runnable with
//! nothing but a kubeconfig, whether ocifit runs or not.

use std::process::ExitCode;

use crate::cluster::gates::{Gate, release_all};

/// `ocifit release-gates`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ReleaseGatesArgs {
    /// Which cluster.
    #[command(flatten)]
    pub kube: crate::startup::KubeArgs,
}

/// Runs `ocifit release-gates`.
pub async fn run(args: &ReleaseGatesArgs) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match crate::startup::kube_client(&args.kube).await {
        Ok(client) => {
            release(
                client,
                &[
                    crate::placement::GATE,
                    crate::image_selection::GATE,
                    crate::artifact_cache::GATE,
                ],
            )
            .await
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(1)
        }
    }
}

/// Removes each of `gates` from every pod holding it and reports each pod: exit 0 when every
/// one was released, 1 otherwise (every other one still is, and each failure is named).
pub async fn release(client: kube::Client, gates: &[Gate]) -> ExitCode {
    let mut pods = std::collections::BTreeSet::new();
    let mut failed = 0;
    let mut unlisted = false;
    for gate in gates {
        match release_all(client.clone(), *gate).await {
            Ok(released) => {
                for pod in &released.pods {
                    println!("released {pod} ({})", gate.name);
                }
                for failure in &released.failed {
                    eprintln!("error: {}", crate::telemetry::error_chain(failure));
                }
                pods.extend(released.pods);
                failed += released.failed.len();
            }
            Err(err) => {
                eprintln!("error: {}", crate::telemetry::error_chain(&err));
                unlisted = true;
            }
        }
    }
    println!("{} pod(s) released", pods.len());
    if failed > 0 {
        eprintln!("{failed} pod(s) could not be released");
    }
    if failed == 0 && !unlisted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
