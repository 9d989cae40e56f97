//! What the helper containers of a step's pod run: `prepare` (the init container: installs the
//! launcher, pulls the inputs) and `deliver` (the native sidecar: waits for the launcher's request,
//! pushes the staged outputs, answers, and stays until the kubelet stops it after the step).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::handoff::{self, Outcome, Request};
use super::install::{self, InstallError};
use super::{PullError, PushRequest, pull, push};
use crate::registry::{Reference, Registry};
use crate::telemetry::error_chain;

/// Why preparing a step failed.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("failed to install the launcher")]
    Install(#[from] InstallError),
    #[error("failed to pull input {reference}")]
    Pull {
        reference: String,
        #[source]
        source: PullError,
    },
}

/// Installs the launcher into `launcher` (when given) and pulls each input into `inputs`, in order.
pub async fn prepare(
    registry: &Registry,
    inputs: &[Reference],
    into: &Path,
    unpack: bool,
    launcher: Option<&Path>,
) -> Result<(), PrepareError> {
    if let Some(dir) = launcher {
        install::install_self(dir)?;
        tracing::info!(dir = %dir.display(), "launcher installed");
    }
    for reference in inputs {
        let pulled = pull(registry, reference, into, unpack)
            .await
            .map_err(|source| PrepareError::Pull {
                reference: reference.whole(),
                source,
            })?;
        let layers: Vec<String> = pulled
            .layers
            .iter()
            .map(|l| l.path.display().to_string())
            .collect();
        tracing::info!(reference = %pulled.reference, digest = %pulled.digest, layers = ?layers, "input pulled");
    }
    Ok(())
}

/// Serves the launcher's requests from `run` until SIGTERM: each pushed to `to` and answered.
pub async fn deliver(
    registry: &Registry,
    run: &Path,
    to: &Reference,
    unpack: bool,
    compression: u32,
) -> std::io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    loop {
        if let Some(request) = pending(run)? {
            let outcome = deliver_one(registry, run, to, unpack, compression, &request).await;
            handoff::write(run, &request.result_file(), &outcome)?;
        }
        tokio::select! {
            _ = terminate.recv() => return Ok(()),
            _ = interrupt.recv() => return Ok(()),
            () = tokio::time::sleep(handoff::POLL) => {}
        }
    }
}

/// A request not answered yet (a restarted pusher finds it again).
fn pending(run: &Path) -> std::io::Result<Option<Request>> {
    let Some(request) = handoff::read::<Request>(run, handoff::REQUEST)? else {
        return Ok(None);
    };
    let answered = run.join(request.result_file()).exists();
    Ok((!answered).then_some(request))
}

async fn deliver_one(
    registry: &Registry,
    run: &Path,
    to: &Reference,
    unpack: bool,
    compression: u32,
    request: &Request,
) -> Outcome {
    let outputs = run.join(&request.outputs);
    let paths: Vec<PathBuf> = match std::fs::read_dir(&outputs) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(err) => {
            return Outcome::Failed {
                message: format!(
                    "cannot read the staged outputs {}: {err}",
                    outputs.display()
                ),
            };
        }
    };
    let request = PushRequest {
        paths,
        unpack,
        artifact_type: super::DEFAULT_ARTIFACT_TYPE.to_string(),
        compression,
    };
    let started = std::time::Instant::now();
    match push(registry, to, &request).await {
        Ok(pushed) => {
            tracing::info!(reference = %pushed.reference, digest = %pushed.digest, seconds = started.elapsed().as_secs_f64(), "outputs pushed");
            Outcome::Pushed {
                reference: pushed.reference,
                digest: pushed.digest,
            }
        }
        Err(err) => {
            let message = format!("pushing to {to}: {}", error_chain(&err));
            tracing::error!(%message, "outputs not pushed");
            Outcome::Failed { message }
        }
    }
}

/// The time the launcher waits for the pusher unless told otherwise.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(3600);
