//! The step helper: the program ocifit's image runs inside a step's pod (`ocifit artifact …`), not
//! in the operator. `prepare` (the init container) installs the launcher and pulls the inputs,
//! `launch` runs the step's command and hands its outputs over, `deliver` (the native sidecar)
//! pushes them (all of pushing is in `push`); `pull` and `push` also move artifacts by hand, and
//! `report` is what was moved, in the termination message. The command line is defined once
//! (`command`). Here, what every part shares: one [`FileError`] shape and how much one pull may
//! write ([`Limits`], taken from a [`Budget`] before a byte is written, so gzip bombs and a
//! million empty files stop with an error naming the limit). Knows nothing of the cluster.

mod archive;
mod beneath;
#[cfg(test)]
mod broken_transfers;
mod channel;
mod command;
mod credentials;
mod inputs;
mod launcher;
mod layout;
mod prepare;
mod pull;
mod push;
mod report;
mod unpack;
pub use command::{Deliver, INPUTS_DIR, Launch, Prepare, Transfer, strings};
pub use credentials::{
    PRE_SPLIT_USER, PULL_PASS, PUSH_PASS, USER, docker_config, from_environment, user,
};
pub use report::{Direction, Report};

pub use archive::ArchiveError;

pub use archive::PackCount;
pub use command::{FileRefError, PushPath, parse_file_ref};
pub use inputs::INPUTS_NAME;
pub use launcher::{EXIT_CANNOT_RUN, EXIT_NOT_FOUND, EXIT_PUSH_FAILED, LaunchSpec, launch};
pub use layout::{
    DEFAULT_ARTIFACT_TYPE, DIRECTORY_MEDIA_TYPE, FILE_MEDIA_TYPE, LayoutError, TAR_DIGEST, TITLE,
    UNPACK,
};
pub use prepare::InstallError;
pub use prepare::{PrepareError, prepare};
pub use pull::{PullError, Pulled, PulledLayer, pull};
pub use push::{PUSH_TIMEOUT, PushError, PushRequest, Pushed, deliver, push};
pub use unpack::UnpackCount;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Args;

use crate::registry::{self, PrivateRegistries, Reference, Registry, RegistryOptions};

/// The gzip level of directory layers unless told otherwise: fast, since a cache sits next to its
/// steps and time matters more than a few percent of size.
pub const DEFAULT_COMPRESSION: u32 = 1;

/// A registry client for transfers to and from the references' registries, with the credentials
/// of `direction` from the environment.
pub fn client(
    references: &[&Reference],
    plain_http: bool,
    direction: Direction,
) -> Result<Registry, registry::Error> {
    let mut options = options(references, plain_http);
    options.credentials = credentials::from_environment(&hosts(references), direction)?;
    Registry::new(options)
}

/// Anonymous client options for transfers to and from the references' registries. Those
/// registries (the cache's Service, an address inside the cluster by nature) are reached whatever
/// they resolve to; redirects and token realms elsewhere stay behind the fence.
pub fn options(references: &[&Reference], plain_http: bool) -> RegistryOptions {
    RegistryOptions {
        plain_http: if plain_http {
            hosts(references).iter().map(|h| (*h).to_string()).collect()
        } else {
            Vec::new()
        },
        private: PrivateRegistries::registries_of(references),
        ..RegistryOptions::default()
    }
}

/// The references' registries (`host[:port]`), each once.
pub fn hosts<'a>(references: &[&'a Reference]) -> Vec<&'a str> {
    let mut hosts: Vec<&str> = references.iter().map(|r| r.registry()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    hosts
}

/// A file-system failure, with what it was doing and where (the archive, the pull and the
/// install say theirs alike).
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {path}")]
pub struct FileError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// For `map_err`: the I/O error of doing `action` on `path`.
fn file_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> FileError + 'a {
    move |source| FileError {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Bytes one pull may write unless told otherwise: the size of the inputs volume ocifit gives a
/// step (`sizeLimit` of its emptyDir).
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024 * 1024;
/// Entries one pull may write unless told otherwise: many small files fit, a million do not (each
/// is an inode of the node's disk, which every pod on it shares).
const DEFAULT_MAX_ENTRIES: u64 = 250_000;

/// The limits, as `pull` and `prepare` take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct Limits {
    /// The most bytes of file content a pull writes (over all its artifacts); more is refused.
    #[arg(long, default_value_t = DEFAULT_MAX_BYTES)]
    pub max_bytes: u64,
    /// The most files, directories and links a pull writes (over all its artifacts); more is
    /// refused.
    #[arg(long, default_value_t = DEFAULT_MAX_ENTRIES)]
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: DEFAULT_MAX_BYTES,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

/// A limit a pull would pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    #[error(
        "refused: the pull would write more than {limit} bytes of files, its limit (--max-bytes); nothing beyond it was written"
    )]
    Bytes { limit: u64 },
    #[error(
        "refused: the pull would write more than {limit} files, directories and links, its limit (--max-entries); nothing beyond it was written"
    )]
    Entries { limit: u64 },
}

/// What is left of the limits during one pull.
#[derive(Debug)]
pub struct Budget {
    limits: Limits,
    bytes: AtomicU64,
    entries: AtomicU64,
}

impl Budget {
    pub fn new(limits: Limits) -> Self {
        Budget {
            limits,
            bytes: AtomicU64::new(0),
            entries: AtomicU64::new(0),
        }
    }

    /// Takes one entry of `bytes` bytes, or refuses it whole (nothing is taken then).
    pub fn take(&self, bytes: u64) -> Result<(), Exceeded> {
        take(&self.bytes, bytes, self.limits.max_bytes)
            .map_err(|limit| Exceeded::Bytes { limit })?;
        take(&self.entries, 1, self.limits.max_entries).map_err(|limit| {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            Exceeded::Entries { limit }
        })
    }
}

/// Adds `amount` to `used` unless that passes `limit`; the limit when it would.
fn take(used: &AtomicU64, amount: u64, limit: u64) -> Result<(), u64> {
    used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
        now.checked_add(amount).filter(|after| *after <= limit)
    })
    .map(|_| ())
    .map_err(|_| limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_takes_up_to_its_limits_and_refuses_the_entry_that_passes_one() {
        let budget = Budget::new(Limits {
            max_bytes: 10,
            max_entries: 3,
        });
        budget.take(6).unwrap();
        assert_eq!(budget.take(5), Err(Exceeded::Bytes { limit: 10 }));
        // The refused entry took nothing: what is left still fits.
        budget.take(4).unwrap();
        assert_eq!(budget.take(u64::MAX), Err(Exceeded::Bytes { limit: 10 }));
        budget.take(0).unwrap();
        assert_eq!(budget.take(0), Err(Exceeded::Entries { limit: 3 }));
    }
}
