//! The controllers' metrics: reconciles of each controller by result and their duration, image
//! selection's artifact fetches, status writes and policies by condition, Events, leadership and
//! placement decisions.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::{
    ConditionLabels, ControllerLabels, FetchLabels, PlacementLabels, Registering, ResultLabels,
};

pub(super) struct ControllerMetrics {
    pub reconciles: Family<ResultLabels, Counter>,
    pub reconcile_duration: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    pub artifact_fetches: Family<FetchLabels, Counter>,
    pub status_writes: Counter,
    pub events: Counter,
    pub events_dropped: Counter,
    pub events_over_quota: Counter,
    pub policies: Family<ConditionLabels, Gauge>,
    pub leader: Gauge,
    pub placements: Family<PlacementLabels, Counter>,
    pub exec_format_errors: Counter,
    pub misplaced_pods: Counter,
    pub misplaced_evictions: Counter,
}

/// Doubling from a pass that finds nothing new up to a slow registry's answer.
fn reconcile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 14))
}

impl ControllerMetrics {
    pub(super) fn register(registry: &mut Registering) -> ControllerMetrics {
        ControllerMetrics {
            reconciles: registry.add(
                "reconciles",
                "Reconciles, by controller (image_selection: a policy; placement: a gated pod; artifact_cache: a cache) and result (ok, artifact_error, error, not_leader)",
                Family::default(),
            ),
            reconcile_duration: registry.add(
                "reconcile_duration_seconds",
                "Time one reconcile took, by controller (not counting those skipped for not leading)",
                Family::new_with_constructor(reconcile_histogram),
            ),
            artifact_fetches: registry.add(
                "image_selection_artifact_fetches",
                "Compatibility artifact resolutions against the registry, by result (ok or the condition reason in snake_case)",
                Family::default(),
            ),
            status_writes: registry.add(
                "status_writes",
                "ImageSelectionPolicy status writes (server-side apply); a pass with nothing new writes nothing",
                Counter::default(),
            ),
            events: registry.add(
                "events",
                "Kubernetes Events published, on every object ocifit reports on (policies, gated pods and their owners, artifact caches)",
                Counter::default(),
            ),
            events_dropped: registry.add(
                "events_dropped",
                "Kubernetes Events dropped unpublished because the queue of Events waiting for the apiserver was full (Events are best effort)",
                Counter::default(),
            ),
            events_over_quota: registry.add(
                "events_over_quota",
                "Kubernetes Events dropped unqueued because the namespace that caused them was past its share of the queue (256 at once, then 10 a second)",
                Counter::default(),
            ),
            policies: registry.add(
                "image_selection_policies",
                "ImageSelectionPolicies by condition type and status (snake_case: ready, degraded, ...; true, false, unknown); leader only",
                Family::default(),
            ),
            leader: registry.add(
                "leader",
                "1 while this replica holds the controller lease",
                Gauge::default(),
            ),
            placements: registry.add(
                "placement_decisions",
                "Gated pods decided by the placement controller, by outcome (constrained, unconstrained, fallback, held)",
                Family::default(),
            ),
            exec_format_errors: registry.add(
                "exec_format_errors",
                "Containers of pods placement released that failed with exec format error (their node's CPU cannot run their image), each failed restart once",
                Counter::default(),
            ),
            misplaced_pods: registry.add(
                "misplaced_pods",
                "Running pods the placement audit found on a node their images are not built for, or whose images' platforms are unknown, each pod once",
                Counter::default(),
            ),
            misplaced_evictions: registry.add(
                "misplaced_evictions",
                "Misplaced pods the placement audit evicted (policies with misplaced: Evict)",
                Counter::default(),
            ),
        }
    }
}
