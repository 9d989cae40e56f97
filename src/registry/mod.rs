//! The registry room: reads compatibility artifacts and image platforms from OCI registries.
//!
//! It owns references, the registry protocol (auth, retries, timeouts, size caps, digest
//! checks), and the caches. It decides which layer, which referrer and which platforms in pure
//! modules (`layers`, `referrers`, `platforms`, `docker_config`, `retry`, `auth`); `transport`
//! and `client` are the thin adapters. It does not parse compatibility documents (the engine
//! does) and knows nothing of Kubernetes objects: callers hand it credentials as a docker config.

mod auth;
mod cache;
mod client;
mod docker_config;
mod error;
mod fetch;
mod flags;
mod layers;
mod manifest;
mod platforms;
mod reference;
mod referrers;
mod retry;
mod stats;
mod transport;

pub use cache::CacheOptions;
pub use client::{FetchedArtifact, ImagePlatforms, Registry, RegistryOptions};
pub use docker_config::{Credentials, DockerConfig};
pub use error::{ConfigError, ContentProblem, Error, ErrorKind, Result, Target};
pub use flags::RegistryFlags;
pub use layers::{Format, NFD_ARTIFACT_TYPE, NFD_LAYER_MEDIA_TYPE, OCIFIT_LAYER_MEDIA_TYPE};
pub use platforms::Platform;
pub use reference::{Reference, parse as parse_reference};
pub use retry::RetryPolicy;
pub use stats::{CacheCounts, RegistryStats};
