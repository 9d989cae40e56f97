//! The controller part of image selection: reconciles every ImageSelectionPolicy into per-class
//! images in its status, assembled here as a kube-runtime `Controller` over the shared cluster
//! view (policy spec changes, node and NodeFeature changes through the [`trackers`], all on
//! becoming leader; in-flight reconciles finish on shutdown). The decisions are pure
//! (`trackers`, `resolution_memory`; the status is `resolution`'s); the adapters
//! (`artifact_fetch`, `reconcile`, `registry_source`, behind the [`Source`] seam) gather inputs
//! and apply the result. It must not decide anything the webhook or `ocifit resolve` decides
//! differently: all three call `resolution`. It must not serve HTTP nor parse flags.

mod artifact_fetch;
mod context;
mod reconcile;
mod registry_source;
mod resolution_memory;
mod trackers;

pub use context::{ControllerTunables, ManagedShare};
pub use registry_source::RegistrySource;
pub use resolution_memory::Backoff;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt, stream};
use kube::runtime::Controller;
use kube::runtime::controller::Config;

use crate::api::{Candidate, ImageSelectionPolicy, REPORTING_CONTROLLER};
use crate::cluster::{Change, ClusterView, EventReporter, Reflected};
use crate::image_selection::resolution::{Failure, Platforms, Resolved};
use crate::telemetry::{Metrics, error_chain};
use context::Context;
use reconcile::{error_policy, reconcile};
use trackers::{FeatureTracker, NodeTracker, Tracked};

/// A reconcile failed against the apiserver (artifact problems are status, not errors).
#[derive(Debug, thiserror::Error)]
pub(super) enum Error {
    /// The pull Secret could not be read (other than missing or forbidden).
    #[error("failed to read the pull secret {namespace}/{name}")]
    ReadSecret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The status could not be applied.
    #[error("failed to write the status of policy {name}")]
    WriteStatus {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Credentials from a policy's pull Secret. Its `Debug` never shows the content.
#[derive(Clone, PartialEq, Eq)]
pub struct PullSecret {
    /// `namespace/name@resourceVersion`: a new version of the Secret is a new key.
    pub key: String,
    /// The `.dockerconfigjson` content.
    pub docker_config_json: Vec<u8>,
}

impl fmt::Debug for PullSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PullSecret")
            .field("key", &self.key)
            .field("docker_config_json", &"<redacted>")
            .finish()
    }
}

/// What a policy's compatibility information is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// One artifact reference (`spec.artifact.ref`).
    Reference(String),
    /// Candidate images, each with its NFD artifact among its referrers
    /// (`spec.artifact.candidates`, in spec order).
    Candidates(Vec<Candidate>),
}

impl fmt::Display for Wanted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wanted::Reference(reference) => f.write_str(reference),
            Wanted::Candidates(candidates) => {
                let images: Vec<&str> = candidates.iter().map(|c| c.image.as_str()).collect();
                write!(f, "candidates {}", images.join(", "))
            }
        }
    }
}

/// One resolution to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The artifact reference or the candidate images.
    pub wanted: Wanted,
    /// Credentials from the pull Secret, if the policy names one.
    pub pull_secret: Option<PullSecret>,
    /// A policy ocifit took charge of for a pod's `image-ref`: what a pod author named, so read
    /// anonymously (never ocifit's credentials) and never from a private, loopback or
    /// link-local address unless the admin allows those for pod-named registries.
    pub managed: bool,
}

/// A resolved artifact (or candidates' artifacts) and the platforms of every candidate image.
#[derive(Debug)]
pub struct Fetched {
    /// The parsed artifact with its digest and format.
    pub resolved: Resolved,
    /// Platform lookups for every candidate image.
    pub platforms: Platforms,
}

/// Resolves artifacts for the reconciler.
pub trait Source: Send + Sync + 'static {
    /// Resolves `request`: the artifact or each candidate's attached artifact (tags re-resolved,
    /// content cached by digest), then the platforms of the candidate images.
    fn fetch<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Fetched, Failure>>;
}

/// The controller's parts, before it runs.
pub(crate) struct ControllerDeps {
    /// The cluster view (its leadership decides who reconciles).
    pub cluster: ClusterView,
    /// Where artifacts come from.
    pub source: Arc<dyn Source>,
    /// Metrics to count into.
    pub metrics: Arc<Metrics>,
    pub settings: ControllerTunables,
    /// This replica's identity (pod name), on its Events.
    pub identity: String,
}

/// The controller over `policies`; the future runs it until `shutdown` resolves and every
/// in-flight reconcile has finished.
pub(crate) fn controller(
    parts: ControllerDeps,
    policies: &Reflected<ImageSelectionPolicy>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> BoxFuture<'static, ()> {
    let ControllerDeps {
        cluster,
        source,
        metrics,
        settings,
        identity,
    } = parts;
    let tracked = Tracked::default();
    let node_tracker = NodeTracker::new(tracked.clone());
    let feature_tracker = FeatureTracker::new(tracked.clone());
    let node_store = cluster.nodes.store();
    let node_triggers = cluster.nodes.subscribe().flat_map(move |change| {
        stream::iter(match change {
            Change::Applied(node) => node_tracker.applied(&node),
            Change::Deleted(node) => node_tracker.deleted(&node),
            Change::Synced => node_tracker.resynced(&node_store),
        })
    });
    let feature_triggers = cluster.node_features.subscribe().flat_map(move |change| {
        stream::iter(match change {
            Change::Applied(object) => feature_tracker.changed(&object, false),
            Change::Deleted(object) => feature_tracker.changed(&object, true),
            Change::Synced => Vec::new(),
        })
    });
    let reporter = EventReporter::new(
        cluster.client.clone(),
        REPORTING_CONTROLLER,
        identity,
        Arc::clone(&metrics),
    );
    let config = Config::default()
        .debounce(settings.debounce)
        // Managed policies take at most their share's places, never one of the others'.
        .concurrency(
            settings
                .concurrency
                .saturating_add(settings.managed.concurrency),
        );
    let gained = cluster.leadership.gained();
    let context = Arc::new(Context::new(
        cluster,
        policies.store(),
        source,
        reporter,
        metrics,
        tracked,
        settings,
    ));
    Controller::for_shared_stream(policies.spec_changes(), policies.store())
        .with_config(config)
        .reconcile_on(node_triggers)
        .reconcile_on(feature_triggers)
        .reconcile_all_on(gained)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| {
            if let Err(err) = result {
                tracing::debug!(error = %error_chain(&err), "controller event");
            }
            std::future::ready(())
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_secret_debug_shows_its_key_and_never_its_content() {
        let secret = PullSecret {
            key: "ns/regcred@7".into(),
            docker_config_json: br#"{"auths":{"r":{"username":"u","password":"hunter2"}}}"#
                .to_vec(),
        };
        let request = Request {
            wanted: Wanted::Reference("r/a:v1".into()),
            pull_secret: Some(secret),
            managed: false,
        };
        let text = format!("{request:?}");
        assert!(text.contains("ns/regcred@7"), "{text}");
        assert!(
            !text.contains("hunter2") && !text.contains("104, 117"),
            "{text}"
        );
    }
}
