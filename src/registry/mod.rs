//! The registry room: reads compatibility artifacts and image platforms from OCI registries, and
//! moves content of any size both ways for the artifact helper (`upload`, `download`). It owns
//! references, the registry protocol (auth, retries, timeouts, size caps, digest checks) and the
//! caches; its decisions are pure modules (`manifest`, `platforms`, `auth`, `allow`,
//! `mirrors`, ...), and `fence` (the one HTTP client constructor), `transport`, `client` and
//! `clients` the thin adapters. The engine parses compatibility documents, at the very end
//! (`resolve`). It knows nothing of Kubernetes objects: credentials come as a docker config.

mod addresses;
mod allow;
mod auth;
mod cache;
mod client;
mod clients;
mod credential_helpers;
mod docker_config;
mod download;
mod error;
mod fence;
mod fetch;
mod inspect;
mod manifest;
mod mirrors;
mod options;
mod platforms;
mod reference;
mod retry;
mod stats;
mod transport;
mod upload;

/// The platforms an image is built for are the platform model's, read here.
pub use crate::platform::Platform;
pub use addresses::PrivateRegistries;
pub use allow::AllowList;
pub use cache::CacheOptions;
pub use client::{FetchedArtifact, Registry, ResolveError, ResolvedArtifact};
pub use clients::Clients;
pub use credential_helpers::{
    CredentialHelpers, HelperAnswer, HelperError, helper_program, read_answer, server_address,
};
pub use docker_config::{Credentials, DockerConfig};
pub use download::BlobStream;
pub use error::{Access, ConfigError, ContentProblem, Error, ErrorKind, Refusal, Result, Target};
pub use inspect::{ImageFacts, InspectError, InspectStats, Inspector, InspectorOptions, Lookup};
pub use manifest::{Descriptor, ImageManifest, OCI_MANIFEST, sha256_digest};
pub use mirrors::Mirrors;
pub use options::RegistryOptions;
pub use options::{RegistryFlags, read_ca_file};
pub use platforms::ImagePlatforms;
pub use reference::{Reference, parse as parse_reference};
pub use retry::BackoffPolicy;
pub use retry::RetryPolicy;
pub use retry::{BrokeOff, GaveUp, Restarts, restarting};
pub use stats::{CacheCounts, RegistryStats, RequestOutcomes};
pub use upload::PushedBlob;
