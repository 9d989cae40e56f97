//! Assembles the kube-runtime `Controller` over the shared cluster view: policies from their
//! store's subscription (spec changes only), node and NodeFeature changes through the trackers
//! (only the policies a change concerns), a reconcile of every policy on becoming leader, and
//! graceful shutdown (in-flight reconciles and writes finish). Pull Secrets are not watched:
//! each pass reads its policy's Secret by name (see `artifact_fetch`).

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt, stream};
use kube::runtime::Controller;
use kube::runtime::controller::Config;

use super::Source;
use super::context::{Context, ControllerTunables};
use super::reconcile::{error_policy, reconcile};
use super::trackers::{FeatureTracker, NodeTracker, Tracked};
use crate::api::{ImageSelectionPolicy, REPORTING_CONTROLLER};
use crate::cluster::ClusterView;
use crate::cluster::EventReporter;
use crate::cluster::{Change, Reflected};
use crate::telemetry::{Metrics, error_chain};

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
