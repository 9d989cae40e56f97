//! The seam between the reconciler and the registry: resolve a policy's artifact reference (with
//! its pull secret's credentials) into a parsed artifact and its candidates' platforms, or a
//! [`Failure`] with a condition reason. The registry room implements it (`registry_source`).

use futures_util::future::BoxFuture;

use super::platform::Platforms;
use super::status::{Failure, Resolved};

/// Credentials from a policy's pull Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullSecret {
    /// `namespace/name@resourceVersion`: a new version of the Secret is a new key.
    pub key: String,
    /// The `.dockerconfigjson` content.
    pub docker_config_json: Vec<u8>,
}

/// One resolution to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The artifact reference (`spec.artifact.ref`).
    pub reference: String,
    /// Credentials from the pull Secret, if the policy names one.
    pub pull_secret: Option<PullSecret>,
}

/// A resolved artifact and the platforms of every candidate image it lists.
#[derive(Debug)]
pub struct Fetched {
    /// The parsed artifact with its digest and format.
    pub resolved: Resolved,
    /// Platform lookups for every candidate image.
    pub platforms: Platforms,
}

/// Resolves artifacts for the reconciler.
pub trait Source: Send + Sync + 'static {
    /// Resolves `request`: the artifact (tag re-resolved, content cached by digest), then the
    /// platforms of its candidate images.
    fn fetch<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Fetched, Failure>>;
}
