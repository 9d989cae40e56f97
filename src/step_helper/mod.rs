//! The step helper: the program ocifit's image runs inside a step's pod (`ocifit artifact …`), not
//! in the operator. `prepare` (the init container) installs the launcher and pulls the inputs,
//! `launch` runs the step's command and hands its outputs over, `deliver` (the native sidecar)
//! pushes them; all of pushing is in `push`. `pull` and `push` also move artifacts by hand, and
//! `report` is what `prepare` and `deliver` moved, in their termination message. The command line
//! is defined once (`command`), for the step planner to write and `ocifit artifact` to parse.
//! Built on the registry client and telemetry; knows nothing of the cluster.

mod archive;
mod beneath;
#[cfg(test)]
mod broken_transfers;
mod channel;
mod command;
mod credentials;
mod file_error;
mod file_ref;
mod inputs;
mod install;
mod launcher;
mod layout;
mod limits;
mod prepare;
mod pull;
mod push;
mod report;
mod unpack;
pub use command::{Deliver, INPUTS_DIR, Launch, Prepare, Transfer, strings};
pub use credentials::{
    PRE_SPLIT_USER, PULL_PASS, PUSH_PASS, USER, docker_config, from_environment, user,
};
pub use limits::{Budget, DEFAULT_MAX_BYTES, Limits};
pub use report::{Direction, Report};

pub use archive::ArchiveError;

pub use archive::PackCount;
pub use file_ref::{FileRefError, PushPath, parse_file_ref};
pub use inputs::INPUTS_NAME;
pub use install::InstallError;
pub use launcher::{EXIT_CANNOT_RUN, EXIT_NOT_FOUND, EXIT_PUSH_FAILED, LaunchSpec, launch};
pub use layout::{
    DEFAULT_ARTIFACT_TYPE, DIRECTORY_MEDIA_TYPE, FILE_MEDIA_TYPE, LayoutError, TAR_DIGEST, TITLE,
    UNPACK,
};
pub use prepare::{PrepareError, prepare};
pub use pull::{PullError, Pulled, PulledLayer, pull};
pub use push::{PUSH_TIMEOUT, PushError, PushRequest, Pushed, deliver, push};
pub use unpack::UnpackCount;

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
