//! `ocifit artifact pull`: an artifact's layers written into a directory as the ORAS clients write
//! them. Each layer streams from the registry through a bounded channel to a blocking thread that
//! writes the file or unpacks the archive into a hidden staging path beside its destination; only
//! once the blob's digest and size (and the archive's own digest, when the pusher recorded it)
//! have matched is it renamed into place. A failed pull leaves no partial file behind, and a pull
//! never replaces something that is already there. What it writes is taken from a [`Budget`]: a
//! file layer's size before it is downloaded, an archive's entries as they are unpacked.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::read::GzDecoder;
use futures_util::{StreamExt, TryStreamExt};

use super::archive::ArchiveError;
use super::channel::{self, ChannelReader, HashingReader};
use super::layout::{self, LayerAction, LayoutError};
use super::unpack;
use super::{Budget, Exceeded};
use super::{FileError, file_error};
use crate::registry::{self, GaveUp, Reference, Registry, restarting};

/// How many layers of one artifact move at once.
const PARALLEL_LAYERS: usize = 3;

/// Why a pull failed.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Registry(#[from] registry::Error),
    #[error("{reference} is not laid out as files")]
    Layout {
        reference: String,
        #[source]
        source: LayoutError,
    },
    #[error("failed to write layer {title:?} of {reference}")]
    Archive {
        reference: String,
        title: String,
        #[source]
        source: ArchiveError,
    },
    #[error("{path} already exists; an artifact is only pulled where nothing is in the way")]
    Exists { path: PathBuf },
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("a transfer thread stopped unexpectedly")]
    Task(#[from] tokio::task::JoinError),
    #[error("failed to write layer {title:?} of {reference}")]
    Limit {
        reference: String,
        title: String,
        #[source]
        source: Exceeded,
    },
    #[error(
        "{what} broke off {attempts} times (the registry failed or the connection to it was cut each time); gave up"
    )]
    BrokeOff {
        what: String,
        attempts: u32,
        #[source]
        last: Box<registry::Error>,
    },
}

/// The error of a read given up: its own, or that it broke off on every try.
fn given_up(what: String, gave_up: GaveUp<registry::Error>) -> PullError {
    match gave_up {
        GaveUp::Refused(err) => err.into(),
        GaveUp::Exhausted { attempts, last } => PullError::BrokeOff {
            what,
            attempts,
            last: Box::new(last),
        },
    }
}

/// One layer written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledLayer {
    /// Where it landed, relative to the output directory.
    pub path: PathBuf,
    /// Whether it was unpacked as a directory.
    pub unpacked: bool,
    /// Bytes received from the registry.
    pub size: u64,
}

/// An artifact written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    pub layers: Vec<PulledLayer>,
}

/// Pulls `reference` into `output` (created if missing). With `unpack` false, directory layers
/// are written as their `.tar.gz`. What it writes is taken from `budget`, which may be shared by
/// several pulls.
pub async fn pull(
    registry: &Registry,
    reference: &Reference,
    output: &Path,
    unpack: bool,
    budget: &Arc<Budget>,
) -> Result<Pulled, PullError> {
    let what = format!("reading the manifest of {}", reference.whole());
    let (digest, manifest) = restarting(&registry.restarts(), &what, || {
        registry.image_manifest(reference)
    })
    .await
    .map_err(|gave_up| given_up(what.clone(), gave_up))?;
    let actions = layout::plan_pull(&manifest, unpack).map_err(|source| PullError::Layout {
        reference: reference.whole(),
        source,
    })?;
    fs::create_dir_all(output).map_err(file_error("create", output))?;
    for action in &actions {
        destination_is_free(output, action)?;
    }
    let layers = futures_util::stream::iter(actions)
        .map(|action| pull_layer(registry, reference, output, action, budget))
        .buffered(PARALLEL_LAYERS)
        .try_collect()
        .await?;
    Ok(Pulled {
        reference: reference.whole(),
        digest,
        layers,
    })
}

async fn pull_layer(
    registry: &Registry,
    reference: &Reference,
    output: &Path,
    action: LayerAction,
    budget: &Arc<Budget>,
) -> Result<PulledLayer, PullError> {
    let (layer, unpacked) = match &action {
        LayerAction::File { layer, .. } => (layer.clone(), false),
        LayerAction::Unpack { layer, .. } => (layer.clone(), true),
    };
    if !unpacked {
        // The registry sends no more than the descriptor's size (`blob_stream` checks).
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        budget.take(size).map_err(|source| PullError::Limit {
            reference: reference.whole(),
            title: action.path().display().to_string(),
            source,
        })?;
    }
    // Once it has begun, the stream itself asks again for what a broken download did not bring.
    let what = format!("the download of {}", action.path().display());
    let mut stream = restarting(&registry.restarts(), &what, || {
        registry.blob_stream(reference, &layer)
    })
    .await
    .map_err(|gave_up| given_up(what.clone(), gave_up))?;
    let staging = Staging::new(output);
    let (sender, receiver) = channel::channel();
    let write = {
        let staging = staging.path.clone();
        let action = action.clone();
        let budget = Arc::clone(budget);
        tokio::task::spawn_blocking(move || write_layer(receiver, &action, &staging, &budget))
    };
    let mut fed = Ok(());
    loop {
        match stream.next_chunk().await {
            Ok(Some(chunk)) => {
                if sender.send(Ok(chunk)).await.is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(err) => {
                let _ = sender
                    .send(Err(io::Error::other("the download failed")))
                    .await;
                fed = Err(err);
                break;
            }
        }
    }
    drop(sender);
    let written = write.await?;
    fed?;
    written.map_err(|err| match err {
        WriteError::Archive(source) => PullError::Archive {
            reference: reference.whole(),
            title: action.path().display().to_string(),
            source,
        },
        WriteError::Io(source) => PullError::Io(FileError {
            action: "write",
            path: output.join(action.path()),
            source,
        }),
    })?;
    staging.commit(output, &action)?;
    Ok(PulledLayer {
        path: action.path().to_path_buf(),
        unpacked,
        size: stream.size(),
    })
}

enum WriteError {
    Archive(ArchiveError),
    Io(io::Error),
}

/// The blocking side: the blob as a file, or its archive unpacked, at `staging`.
fn write_layer(
    receiver: tokio::sync::mpsc::Receiver<channel::Chunk>,
    action: &LayerAction,
    staging: &Path,
    budget: &Budget,
) -> Result<(), WriteError> {
    match action {
        LayerAction::File { .. } => {
            let mut file = fs::File::create_new(staging).map_err(WriteError::Io)?;
            let mut receiver = receiver;
            // Each chunk as it came: no copy through a small buffer.
            while let Some(chunk) = receiver.blocking_recv() {
                file.write_all(&chunk.map_err(WriteError::Io)?)
                    .map_err(WriteError::Io)?;
            }
            Ok(())
        }
        LayerAction::Unpack {
            path, tar_digest, ..
        } => {
            fs::create_dir(staging).map_err(WriteError::Io)?;
            let reader = ChannelReader::new(receiver);
            let mut tar = HashingReader::new(GzDecoder::new(reader));
            unpack::unpack(&mut tar, path, staging, budget).map_err(WriteError::Archive)?;
            let actual = tar.digest();
            match tar_digest {
                Some(expected) if *expected != actual => {
                    Err(WriteError::Archive(ArchiveError::TarDigest {
                        expected: expected.clone(),
                        actual,
                    }))
                }
                _ => Ok(()),
            }
        }
    }
}

fn destination_is_free(output: &Path, action: &LayerAction) -> Result<(), PullError> {
    let taken = |path: PathBuf| Err(PullError::Exists { path });
    if action.path().as_os_str().is_empty() {
        // `.`: the directory's own content; each entry is checked when it is moved in.
        return Ok(());
    }
    let destination = output.join(action.path());
    match destination.symlink_metadata() {
        Ok(_) => taken(destination),
        Err(_) => Ok(()),
    }
}

/// A hidden path beside the destination, removed unless committed.
struct Staging {
    path: PathBuf,
    committed: bool,
}

static STAGING: AtomicU64 = AtomicU64::new(0);

impl Staging {
    fn new(output: &Path) -> Self {
        let n = STAGING.fetch_add(1, Ordering::Relaxed);
        Staging {
            path: output.join(format!(".ocifit-partial-{}-{n}", std::process::id())),
            committed: false,
        }
    }

    /// Moves the staged layer to its destination.
    fn commit(mut self, output: &Path, action: &LayerAction) -> Result<(), PullError> {
        let moves: Vec<(PathBuf, PathBuf)> = if action.path().as_os_str().is_empty() {
            let entries = fs::read_dir(&self.path).map_err(file_error("read", &self.path))?;
            let mut moves = Vec::new();
            for entry in entries {
                let entry = entry.map_err(file_error("read", &self.path))?;
                moves.push((entry.path(), output.join(entry.file_name())));
            }
            moves
        } else {
            vec![(self.path.clone(), output.join(action.path()))]
        };
        for (from, to) in moves {
            if to.symlink_metadata().is_ok() {
                return Err(PullError::Exists { path: to });
            }
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent).map_err(file_error("create", parent))?;
            }
            fs::rename(&from, &to).map_err(file_error("move into place", &to))?;
        }
        self.committed = true;
        let _ = fs::remove_dir(&self.path);
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.path).or_else(|_| fs::remove_file(&self.path));
        }
    }
}
