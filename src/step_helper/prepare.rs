//! `prepare`, the init container of a step's pod: installs the launcher and pulls the step's
//! inputs, merged into one directory.

use std::path::Path;

use super::inputs::{MergeError, Merged};
use super::install::{self, InstallError};
use super::pull::{PullError, pull};
use super::report::Report;
use super::{Budget, Limits};
use super::{FileError, file_error};
use crate::registry::{Reference, Registry};

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
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error(transparent)]
    Io(#[from] FileError),
}

/// Installs the launcher into `launcher` (when given) and pulls each input beside the others (one
/// volume, so moving in is a rename), then merges them into `into`; a file in two inputs is an
/// error naming both. All inputs together write within `limits`; `report` gets what was pulled.
pub async fn prepare(
    registry: &Registry,
    inputs: &[Reference],
    into: &Path,
    (unpack, limits): (bool, Limits),
    launcher: Option<&Path>,
    report: &mut Report,
) -> Result<(), PrepareError> {
    if let Some(dir) = launcher {
        install::install_self(dir)?;
        tracing::info!(dir = %dir.display(), "launcher installed");
    }
    let mut merged = Merged::default();
    let budget = std::sync::Arc::new(Budget::new(limits));
    for (n, reference) in inputs.iter().enumerate() {
        let alone = into.join(format!(".ocifit-input-{n}"));
        let started = std::time::Instant::now();
        let pulled = pull(registry, reference, &alone, unpack, &budget)
            .await
            .map_err(|source| PrepareError::Pull {
                reference: reference.whole(),
                source,
            })?;
        report.moved(pulled.layers.iter().map(|l| l.size), started.elapsed());
        merged.add(&alone, into, &reference.whole())?;
        // Only the directories merged into others are left, empty.
        std::fs::remove_dir_all(&alone).map_err(file_error("remove", &alone))?;
        let layers: Vec<String> = pulled
            .layers
            .iter()
            .map(|l| l.path.display().to_string())
            .collect();
        tracing::info!(reference = %pulled.reference, digest = %pulled.digest, layers = ?layers, "input pulled");
    }
    Ok(())
}
