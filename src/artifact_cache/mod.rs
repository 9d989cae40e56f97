//! The workflow artifact cache: the step helper (`ocifit artifact …`) that pulls a step's inputs
//! before it starts and pushes its outputs when it succeeds, in the ORAS artifact layout; the step
//! planner that turns the oras-operator's annotations into a pod mutation; and the desired objects
//! of an ArtifactCache's registry. Depends only on the ground rooms (`api`, `registry`,
//! `telemetry`).
//!
//! Pure parts: `layout` (the ORAS layout both ways), `planner` (annotations → patch or denial),
//! `desired` (a cache's Deployment, Service and claim). Adapters: `archive`, `channel`, `pull`,
//! `push` (bytes between disk and registry), `install`, `launcher`, `handoff`, `steps` (what runs
//! in a step's pod).

mod archive;
mod channel;
pub mod credentials;
pub mod desired;
mod handoff;
mod install;
mod launcher;
mod layout;
pub mod planner;
mod pull;
mod push;
mod steps;

pub use archive::{ArchiveError, PackCount, UnpackCount};
pub use install::InstallError;
pub use launcher::{EXIT_CANNOT_RUN, EXIT_NOT_FOUND, EXIT_PUSH_FAILED, Launch, launch};
pub use layout::{
    DEFAULT_ARTIFACT_TYPE, DIRECTORY_MEDIA_TYPE, FILE_MEDIA_TYPE, LayoutError, TAR_DIGEST, TITLE,
    UNPACK,
};
pub use pull::{PullError, Pulled, PulledLayer, pull};
pub use push::{PushError, PushRequest, Pushed, push};
pub use steps::{PUSH_TIMEOUT, PrepareError, deliver, prepare};

use crate::registry::{self, Reference, Registry, RegistryOptions};

/// The gzip level of directory layers unless told otherwise: fast, since a cache sits next to its
/// steps and time matters more than a few percent of size.
pub const DEFAULT_COMPRESSION: u32 = 1;

/// A registry client for transfers to and from the references' registries, with the credentials
/// of `direction` from the environment.
pub fn client(
    references: &[&Reference],
    plain_http: bool,
    direction: credentials::Direction,
) -> Result<Registry, registry::Error> {
    let mut hosts: Vec<&str> = references.iter().map(|r| r.registry()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let options = RegistryOptions {
        plain_http: if plain_http {
            hosts.iter().map(|h| (*h).to_string()).collect()
        } else {
            Vec::new()
        },
        credentials: credentials::from_environment(&hosts, direction)?,
        ..RegistryOptions::default()
    };
    Registry::new(options)
}
