//! Everything the step helper pushes: `ocifit artifact push` (here) pushes files and directories
//! as one artifact in the ORAS layout, and a step's outputs take the same push (staged by the
//! launcher, asked for through `handoff`, pushed by `deliver`). A file streams from disk; a
//! directory is archived and compressed on a blocking thread while it uploads, both hashed on the
//! way (the blob's digest, and the tar's for `io.deis.oras.content.digest`), so nothing goes to a
//! temporary file. No symbolic link is followed: each path is opened with `O_NOFOLLOW` (a link
//! named to be pushed is refused) and links inside a directory are archived as links.

mod deliver;
pub(super) mod handoff;

pub use deliver::PUSH_TIMEOUT;

pub use deliver::deliver;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures_util::{StreamExt, TryStreamExt};

use super::FileError;
use super::archive::{self, ArchiveError};
use super::beneath::{self, BeneathError};
use super::channel::{self, ChannelWriter, HashingWriter};
use super::command::PushPath;
use super::layout::{self, PushedLayer};
use crate::registry::{self, BrokeOff, GaveUp, OCI_MANIFEST, Reference, Registry, restarting};

/// How many layers of one artifact move at once.
const PARALLEL_LAYERS: usize = 3;

/// What to push and how.
#[derive(Debug, Clone)]
pub struct PushRequest {
    /// Files and directories, each one layer titled with its name (of its media type when named).
    pub paths: Vec<PushPath>,
    /// Directories as `.tar.gz` layers to unpack (true), or kept as `<name>.tar.gz` (false).
    pub unpack: bool,
    /// The manifest's `artifactType`.
    pub artifact_type: String,
    /// gzip level of directory layers, 0–9.
    pub compression: u32,
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error(transparent)]
    Registry(#[from] registry::Error),
    #[error("nothing to push: name at least one file or directory")]
    Nothing,
    #[error("{path} has no file name to title its layer with")]
    NoName { path: PathBuf },
    #[error("two layers would be titled {0:?}; push paths with different names")]
    DuplicateTitle(String),
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path} is a symbolic link; ocifit pushes no link's target: name the file or directory itself"
    )]
    Symlink { path: PathBuf },
    #[error("{path} is neither a file nor a directory")]
    NotPushable { path: PathBuf },
    #[error("failed to archive {path}")]
    Archive {
        path: PathBuf,
        #[source]
        source: ArchiveError,
    },
    #[error("failed to write the manifest")]
    Manifest(#[source] serde_json::Error),
    #[error("a transfer thread stopped unexpectedly")]
    Task(#[from] tokio::task::JoinError),
    #[error(
        "{what} broke off {attempts} times (the registry failed or the connection to it was cut each time); gave up"
    )]
    BrokeOff {
        what: String,
        attempts: u32,
        #[source]
        last: Box<PushError>,
    },
}

impl BrokeOff for PushError {
    fn broke_off(&self) -> bool {
        matches!(self, PushError::Registry(err) if err.broke_off())
    }
}

/// The error of a transfer given up: its own, or that it broke off on every try.
fn given_up<E: Into<PushError>>(what: String, gave_up: GaveUp<E>) -> PushError {
    match gave_up {
        GaveUp::Refused(err) => err.into(),
        GaveUp::Exhausted { attempts, last } => PushError::BrokeOff {
            what,
            attempts,
            last: Box::new(last.into()),
        },
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    pub layers: Vec<PushedLayer>,
}

/// A file or directory to push, already open (nothing is read by name after this), with its
/// layer's title.
pub(super) struct Source {
    /// How it is named in messages.
    path: PathBuf,
    pub(super) name: String,
    opened: Opened,
    /// The layer's media type when the command line named one.
    media_type: Option<String>,
}

enum Opened {
    File(fs::File),
    Directory(OwnedFd),
}

impl Source {
    /// Opens `name` in the directory `dir` without following a link: a link, or anything but a
    /// file or a directory, is refused. `shown` names it in messages.
    pub(super) fn open_at(dir: impl AsFd, name: &str, shown: &Path) -> Result<Source, PushError> {
        let file = beneath::open_at(dir, OsStr::new(name), &shown.display().to_string())
            .map_err(|err| opening_error(shown, err))?;
        Source::from_file(file, name.to_string(), shown)
    }

    /// Opens `path` (what leads to it may be links, as on any command line; its last component
    /// may not), titled with its real name: `.` and `..` name a directory by where it is.
    fn open(path: &Path) -> Result<Source, PushError> {
        let named = fs::canonicalize(path).map_err(|source| read_error(path, source))?;
        let name = named
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| PushError::NoName {
                path: path.to_path_buf(),
            })?
            .to_string();
        let file = beneath::open_at(
            rustix::fs::CWD,
            path.as_os_str(),
            &path.display().to_string(),
        )
        .map_err(|err| opening_error(path, err))?;
        Source::from_file(file, name, path)
    }

    /// The same file or directory read again from its start, for a push started over: a file's
    /// handle duplicated and rewound, a directory's duplicated (its entries are listed anew).
    fn again(&self) -> Result<Source, PushError> {
        let opened = match &self.opened {
            Opened::File(file) => {
                let mut file = file
                    .try_clone()
                    .map_err(|source| read_error(&self.path, source))?;
                file.rewind()
                    .map_err(|source| read_error(&self.path, source))?;
                Opened::File(file)
            }
            Opened::Directory(dir) => Opened::Directory(
                dir.try_clone()
                    .map_err(|source| read_error(&self.path, source))?,
            ),
        };
        Ok(Source {
            path: self.path.clone(),
            name: self.name.clone(),
            opened,
            media_type: self.media_type.clone(),
        })
    }

    fn from_file(file: fs::File, name: String, shown: &Path) -> Result<Source, PushError> {
        let metadata = file
            .metadata()
            .map_err(|source| read_error(shown, source))?;
        let opened = if metadata.is_dir() {
            Opened::Directory(OwnedFd::from(file))
        } else if metadata.is_file() {
            Opened::File(file)
        } else {
            return Err(PushError::NotPushable {
                path: shown.to_path_buf(),
            });
        };
        Ok(Source {
            path: shown.to_path_buf(),
            name,
            opened,
            media_type: None,
        })
    }
}

fn opening_error(path: &Path, err: BeneathError) -> PushError {
    match err {
        BeneathError::Symlink(_) => PushError::Symlink {
            path: path.to_path_buf(),
        },
        BeneathError::Io(source) => read_error(path, source),
    }
}

/// Pushes the request's paths as one artifact to `reference`.
pub async fn push(
    registry: &Registry,
    reference: &Reference,
    request: &PushRequest,
) -> Result<Pushed, PushError> {
    let sources = sources(&request.paths)?;
    push_sources(registry, reference, request, sources).await
}

/// Pushes sources already open as one artifact to `reference` (the request's paths unused).
pub(super) async fn push_sources(
    registry: &Registry,
    reference: &Reference,
    request: &PushRequest,
    sources: Vec<Source>,
) -> Result<Pushed, PushError> {
    if sources.is_empty() {
        return Err(PushError::Nothing);
    }
    let mut titles = BTreeSet::new();
    for source in &sources {
        if !titles.insert(source.name.clone()) {
            return Err(PushError::DuplicateTitle(source.name.clone()));
        }
    }
    let layers: Vec<PushedLayer> = futures_util::stream::iter(sources)
        .map(|source| push_layer(registry, reference, request, source))
        .buffered(PARALLEL_LAYERS)
        .try_collect()
        .await?;
    let restarts = registry.restarts();
    let what = "the upload of the config";
    restarting(&restarts, what, || {
        registry.push_blob(reference, Bytes::from_static(layout::EMPTY_CONFIG))
    })
    .await
    .map_err(|gave_up| given_up(what.into(), gave_up))?;
    let created = jiff::Timestamp::now().to_string();
    let manifest = Bytes::from(
        layout::manifest_json(&layers, &request.artifact_type, &created)
            .map_err(PushError::Manifest)?,
    );
    let what = "the upload of the manifest";
    let digest = restarting(&restarts, what, || {
        registry.push_manifest(reference, OCI_MANIFEST, manifest.clone())
    })
    .await
    .map_err(|gave_up| given_up(what.into(), gave_up))?;
    Ok(Pushed {
        reference: reference.whole(),
        digest,
        layers,
    })
}

/// The paths opened with their titles, checked before anything is sent.
fn sources(paths: &[PushPath]) -> Result<Vec<Source>, PushError> {
    if paths.is_empty() {
        return Err(PushError::Nothing);
    }
    paths
        .iter()
        .map(|pushed| {
            let mut source = Source::open(&pushed.path)?;
            source.media_type = pushed.media_type.clone();
            Ok(source)
        })
        .collect()
}

/// Pushes one layer, from its start again each time its upload breaks off (a registry replica
/// gone mid-body resumes nothing: the next try opens a new session, on whichever replica answers).
async fn push_layer(
    registry: &Registry,
    reference: &Reference,
    request: &PushRequest,
    source: Source,
) -> Result<PushedLayer, PushError> {
    let what = format!("the upload of {}", source.path.display());
    restarting(&registry.restarts(), &what, || async {
        push_layer_once(registry, reference, request, source.again()?).await
    })
    .await
    .map_err(|gave_up| given_up(what.clone(), gave_up))
}

async fn push_layer_once(
    registry: &Registry,
    reference: &Reference,
    request: &PushRequest,
    source: Source,
) -> Result<PushedLayer, PushError> {
    let (sender, receiver) = channel::channel();
    let Source {
        path,
        name,
        opened,
        media_type,
    } = source;
    let produce = {
        let path = path.clone();
        let name = name.clone();
        let level = request.compression.min(9);
        tokio::task::spawn_blocking(move || {
            let mut writer = ChannelWriter::new(sender);
            let produced = match opened {
                Opened::Directory(dir) => compress(dir, &path, &name, level, &mut writer),
                Opened::File(file) => copy_file(file, &path, &mut writer).map(|()| None),
            }
            .and_then(|digest| {
                writer.flush().map_err(|source| read_error(&path, source))?;
                Ok(digest)
            });
            if produced.is_err() {
                // End the upload's body with a failure, so the registry never commits a short blob.
                writer.fail(io::Error::other("reading the content failed"));
            }
            produced
        })
    };
    let uploaded = registry
        .push_blob_stream(reference, channel::into_stream(receiver))
        .await;
    match (produce.await?, uploaded) {
        (Ok(tar_digest), Ok(blob)) => Ok(match tar_digest {
            Some(tar_digest) => {
                PushedLayer::directory(&name, request.unpack, blob.digest, blob.size, tar_digest)
            }
            None => PushedLayer::file(&name, blob.digest, blob.size),
        }
        .of_type(media_type)),
        // The reading stopped because the upload did: the upload's error is the cause.
        (Err(read), Err(upload)) if read.upload_stopped() => Err(upload.into()),
        (Err(read), _) => Err(read),
        (Ok(_), Err(upload)) => Err(upload.into()),
    }
}

impl PushError {
    fn upload_stopped(&self) -> bool {
        let source = match self {
            PushError::Read { source, .. } => Some(source),
            PushError::Archive {
                source: ArchiveError::Io(FileError { source, .. }),
                ..
            } => Some(source),
            _ => None,
        };
        source.is_some_and(channel::is_stopped)
    }
}

fn read_error(path: &Path, source: io::Error) -> PushError {
    PushError::Read {
        path: path.to_path_buf(),
        source,
    }
}

fn copy_file(mut file: fs::File, path: &Path, writer: &mut ChannelWriter) -> Result<(), PushError> {
    let mut buffer = vec![0u8; channel::CHUNK];
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|source| read_error(path, source))?;
        if n == 0 {
            return Ok(());
        }
        writer
            .write_all(&buffer[..n])
            .map_err(|source| read_error(path, source))?;
    }
}

/// Archives and compresses a directory into the writer; the uncompressed archive's digest.
fn compress(
    dir: OwnedFd,
    path: &Path,
    name: &str,
    level: u32,
    writer: &mut ChannelWriter,
) -> Result<Option<String>, PushError> {
    let gzip = GzEncoder::new(writer, Compression::new(level));
    let mut tar = HashingWriter::new(io::BufWriter::with_capacity(channel::CHUNK, gzip));
    archive::pack_dir(dir, &path.display().to_string(), name, &mut tar).map_err(|source| {
        PushError::Archive {
            path: path.to_path_buf(),
            source,
        }
    })?;
    let (buffered, tar_digest) = tar.finish();
    let gzip = buffered
        .into_inner()
        .map_err(|err| read_error(path, err.into_error()))?;
    gzip.finish().map_err(|source| read_error(path, source))?;
    Ok(Some(tar_digest))
}
