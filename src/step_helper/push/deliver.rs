//! `deliver`, the native sidecar of a step's pod: waits for the launcher's request (through
//! `handoff`), pushes the staged outputs, answers, and stays until the kubelet
//! stops it after the step.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::handoff::{self, BadId, Outcome, Request};
use super::{PushError, PushRequest, Source, push_sources};
use crate::registry::{Reference, Registry};
use crate::step_helper::beneath::{self, BeneathError};
use crate::step_helper::layout::DEFAULT_ARTIFACT_TYPE;
use crate::step_helper::report::Report;
use crate::telemetry::error_chain;

/// Serves the launcher's requests from `run` until SIGTERM, each pushed to `to` and answered. A
/// request that cannot be served (step code can write `run`) is logged and left for the launcher's
/// own to replace. `report` gets what was pushed (untouched when nothing was asked).
pub async fn deliver(
    registry: &Registry,
    run: &Path,
    to: &Reference,
    unpack: bool,
    compression: u32,
    report: &mut Report,
) -> std::io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut refused = None;
    loop {
        match pending(run) {
            Ok(Some(request)) => {
                let outcome =
                    deliver_one(registry, run, to, unpack, compression, &request, report).await;
                handoff::write(run, &request.result_file(), &outcome)?;
            }
            Ok(None) => {}
            Err(why) => {
                let why = why.to_string();
                if refused.as_ref() != Some(&why) {
                    tracing::warn!(%why, "a request in the run volume is not served");
                    refused = Some(why);
                }
            }
        }
        tokio::select! {
            _ = terminate.recv() => return Ok(()),
            _ = interrupt.recv() => return Ok(()),
            () = tokio::time::sleep(handoff::POLL) => {}
        }
    }
}

/// Why a request in the run volume is not served.
#[derive(Debug, thiserror::Error)]
enum Unserved {
    #[error("failed to read {request}: {0}", request = handoff::REQUEST)]
    Unreadable(#[source] io::Error),
    #[error(transparent)]
    Id(#[from] BadId),
}

/// A request not answered yet (a restarted pusher finds it again), with a plain id.
fn pending(run: &Path) -> Result<Option<Request>, Unserved> {
    let request = handoff::read::<Request>(run, handoff::REQUEST).map_err(Unserved::Unreadable)?;
    let Some(request) = request else {
        return Ok(None);
    };
    request.checked_id()?;
    let answered = run.join(request.result_file()).symlink_metadata().is_ok();
    Ok((!answered).then_some(request))
}

/// Pushes `outputs-<id>` of the run volume: each of its entries (one: the step's output-path; or
/// each entry of its working directory) a layer, opened without following a link (the directory
/// itself, the entries and everything under them).
async fn deliver_one(
    registry: &Registry,
    run: &Path,
    to: &Reference,
    unpack: bool,
    compression: u32,
    request: &Request,
    report: &mut Report,
) -> Outcome {
    let outputs = run.join(request.outputs());
    let sources = match staged(run, &request.outputs(), &outputs) {
        Ok(sources) => sources,
        Err(err) => {
            let message = error_chain(&err);
            tracing::error!(%message, "outputs not pushed");
            report.failed(message.clone());
            return Outcome::Failed { message };
        }
    };
    let request = PushRequest {
        paths: Vec::new(),
        unpack,
        artifact_type: DEFAULT_ARTIFACT_TYPE.to_string(),
        compression,
    };
    let started = std::time::Instant::now();
    match push_sources(registry, to, &request, sources).await {
        Ok(pushed) => {
            report.moved(pushed.layers.iter().map(|l| l.size), started.elapsed());
            tracing::info!(reference = %pushed.reference, digest = %pushed.digest, seconds = started.elapsed().as_secs_f64(), "outputs pushed");
            Outcome::Pushed {
                reference: pushed.reference,
                digest: pushed.digest,
            }
        }
        Err(err) => {
            let message = format!("failed to push to {to}: {}", error_chain(&err));
            tracing::error!(%message, "outputs not pushed");
            report.seconds += started.elapsed().as_secs_f64();
            report.failed(message.clone());
            Outcome::Failed { message }
        }
    }
}

/// Why the staged outputs cannot be pushed.
#[derive(Debug, thiserror::Error)]
enum Unstaged {
    #[error("failed to read the staged outputs {}: {source}", shown.display())]
    Unreadable {
        shown: PathBuf,
        #[source]
        source: BeneathError,
    },
    #[error(
        "the staged outputs {} hold nothing to push (an empty working directory?)",
        shown.display()
    )]
    Empty { shown: PathBuf },
    #[error(
        "the staged outputs {} hold {name:?}, which is no UTF-8 name to title a layer with",
        shown.display()
    )]
    NotUtf8 { shown: PathBuf, name: OsString },
    #[error(transparent)]
    Open(#[from] PushError),
}

/// The entries of the staged outputs' directory, open, in name order.
fn staged(run: &Path, directory: &str, shown: &Path) -> Result<Vec<Source>, Unstaged> {
    let cannot = |source: BeneathError| Unstaged::Unreadable {
        shown: shown.to_path_buf(),
        source,
    };
    let run_dir = beneath::open_dir(run).map_err(cannot)?;
    let outputs = beneath::open_dir_at(
        &run_dir,
        OsStr::new(directory),
        &shown.display().to_string(),
    )
    .map_err(cannot)?;
    let mut names = beneath::names(&outputs).map_err(|err| cannot(err.into()))?;
    if names.is_empty() {
        return Err(Unstaged::Empty {
            shown: shown.to_path_buf(),
        });
    }
    names.sort();
    names
        .iter()
        .map(|name| {
            let utf8 = name.to_str().ok_or_else(|| Unstaged::NotUtf8 {
                shown: shown.to_path_buf(),
                name: name.clone(),
            })?;
            Ok(Source::open_at(&outputs, utf8, &shown.join(utf8))?)
        })
        .collect()
}

/// The time the launcher waits for the pusher unless told otherwise.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn run_dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn staged_in(run: &Path, id: &str) -> Result<Vec<Source>, String> {
        let request = Request::new(id.to_string());
        staged(run, &request.outputs(), &run.join(request.outputs()))
            .map_err(|err| error_chain(&err))
    }

    #[test]
    fn the_pusher_reads_only_the_outputs_of_the_requests_id() {
        let run = run_dir();
        fs::create_dir_all(run.path().join("elsewhere/out")).unwrap();
        // A forged request may name another directory; the pusher does not read that field.
        fs::write(
            run.path().join(handoff::REQUEST),
            r#"{"id":"7","outputs":"elsewhere"}"#,
        )
        .unwrap();
        let request = pending(run.path()).unwrap().unwrap();
        let err = staged_in(run.path(), &request.id).err().unwrap();
        assert!(err.contains("outputs-7"), "{err}");

        fs::create_dir_all(run.path().join("outputs-7/out")).unwrap();
        assert!(staged_in(run.path(), "7").is_ok());
    }

    #[test]
    fn a_request_with_a_climbing_id_is_not_served() {
        let run = run_dir();
        fs::write(run.path().join(handoff::REQUEST), r#"{"id":"x/../../y"}"#).unwrap();
        let err = pending(run.path()).unwrap_err().to_string();
        assert!(err.contains("letters, digits or '-'"), "{err}");
    }

    #[test]
    fn staged_outputs_are_never_reached_through_a_link() {
        let run = run_dir();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), b"s").unwrap();

        // The entry to push is a link to a file outside the outputs.
        fs::create_dir(run.path().join("outputs-1")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret"),
            run.path().join("outputs-1/out"),
        )
        .unwrap();
        let err = staged_in(run.path(), "1").err().unwrap();
        assert!(err.contains("symbolic link"), "{err}");

        // The outputs directory itself is a link.
        std::os::unix::fs::symlink(outside.path(), run.path().join("outputs-2")).unwrap();
        let err = staged_in(run.path(), "2").err().unwrap();
        assert!(err.contains("symbolic link"), "{err}");

        // Nothing staged.
        fs::create_dir_all(run.path().join("outputs-3")).unwrap();
        let err = staged_in(run.path(), "3").err().unwrap();
        assert!(err.contains("nothing to push"), "{err}");
    }

    #[test]
    fn every_staged_entry_is_a_layer_of_its_own() {
        let run = run_dir();
        fs::create_dir_all(run.path().join("outputs-4/out")).unwrap();
        fs::write(run.path().join("outputs-4/said.txt"), b"s").unwrap();
        let sources = staged_in(run.path(), "4").unwrap();
        let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["out", "said.txt"]);
    }
}
