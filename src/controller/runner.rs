//! Assembles the kube-runtime `Controller`: the policy watch (spec changes), node, NodeFeature and
//! Secret watches with their mappers, the reconcile-all trigger on becoming leader, and graceful
//! shutdown (in-flight reconciles and writes finish). Returns the stores for the admin server's
//! readiness and the webhook.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use kube::runtime::controller::Config;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{Controller, WatchStreamExt, predicates, reflector, watcher};
use kube::{Api, Client};

use super::context::{Context, Interests, Settings, Stores};
use super::leader::Leadership;
use super::reconcile::{error_policy, reconcile};
use super::source::Source;
use super::watches::{self, FeatureTracker, NodeTracker, policies_for_secret};
use crate::api::ImageSelectionPolicy;
use crate::telemetry::{Metrics, error_chain};

/// The name Events are reported under.
pub const REPORTING_CONTROLLER: &str = "ocifit-controller";

/// The controller's parts, before it runs.
pub struct Parts {
    /// The apiserver client.
    pub client: Client,
    /// Where artifacts come from.
    pub source: Arc<dyn Source>,
    /// Whether this replica leads.
    pub leadership: Leadership,
    /// Metrics to count into.
    pub metrics: Arc<Metrics>,
    /// Tunables.
    pub settings: Settings,
    /// This replica's identity (pod name), on its Events.
    pub identity: String,
}

/// Builds the controller; the returned future runs it until `shutdown` resolves and every
/// in-flight reconcile has finished.
pub fn controller(
    parts: Parts,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> (Stores, BoxFuture<'static, ()>) {
    let Parts {
        client,
        source,
        leadership,
        metrics,
        settings,
        identity,
    } = parts;
    let (policy_reader, policy_writer) = reflector::store();
    // Status-only changes (our own writes) do not reconcile; spec changes and triggers do.
    let policies = watcher(
        Api::<ImageSelectionPolicy>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(policy_writer)
    .applied_objects()
    .predicate_filter(predicates::generation, Default::default());
    let (node_reader, node_writer) = reflector::store();
    let (feature_reader, feature_writer) = reflector::store();
    let stores = Stores {
        policies: policy_reader.clone(),
        nodes: node_reader,
        node_features: feature_reader,
    };
    let interests = Interests::default();
    let node_tracker = NodeTracker::new(Arc::clone(&interests));
    let feature_tracker = FeatureTracker::new(Arc::clone(&interests));
    let secret_policies = policy_reader.clone();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: REPORTING_CONTROLLER.to_owned(),
            instance: Some(identity),
        },
    );
    let config = Config::default()
        .debounce(settings.debounce)
        .concurrency(settings.concurrency);
    let gained = leadership.gained();
    let discovery_interval = settings.nfd_discovery_interval;
    let context = Arc::new(Context::new(
        client.clone(),
        source,
        stores.clone(),
        leadership,
        recorder,
        metrics,
        interests,
        settings,
    ));
    let run = Controller::for_stream(policies, policy_reader)
        .with_config(config)
        .watches_stream(watches::nodes(client.clone(), node_writer), move |node| {
            node_tracker.policies_for(&node)
        })
        .watches_stream(
            watches::node_features(client.clone(), feature_writer, discovery_interval),
            move |object| feature_tracker.policies_for(&object),
        )
        .watches_stream(watches::secrets(client), move |secret| {
            policies_for_secret(&secret_policies, &secret)
        })
        .reconcile_all_on(gained)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| {
            if let Err(err) = result {
                tracing::debug!(error = %error_chain(&err), "controller event");
            }
            std::future::ready(())
        })
        .boxed();
    (stores, run)
}
