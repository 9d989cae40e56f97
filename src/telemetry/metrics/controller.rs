//! The controllers' metrics: reconciles and their results, artifact fetches, status writes,
//! Events, policies by condition, leadership and placement decisions.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::{ConditionLabels, FetchLabels, PlacementLabels, Registering, ResultLabels};

pub(super) struct ControllerMetrics {
    pub reconciles: Family<ResultLabels, Counter>,
    pub reconcile_duration: Histogram,
    pub artifact_fetches: Family<FetchLabels, Counter>,
    pub status_writes: Counter,
    pub events: Counter,
    pub events_dropped: Counter,
    pub events_over_quota: Counter,
    pub policies: Family<ConditionLabels, Gauge>,
    pub leader: Gauge,
    pub placements: Family<PlacementLabels, Counter>,
    pub exec_format_errors: Counter,
}

impl ControllerMetrics {
    pub(super) fn register(registry: &mut Registering) -> ControllerMetrics {
        ControllerMetrics {
            reconciles: registry.add(
                "reconciles",
                "Reconciles of ImageSelectionPolicies, by result",
                Family::default(),
            ),
            reconcile_duration: registry.add(
                "reconcile_duration_seconds",
                "Time to reconcile one ImageSelectionPolicy",
                Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            ),
            artifact_fetches: registry.add(
                "artifact_fetches",
                "Compatibility artifact resolutions against the registry, by result (Ok or the condition reason)",
                Family::default(),
            ),
            status_writes: registry.add(
                "status_writes",
                "Policy status writes (server-side apply); a pass with nothing new writes nothing",
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
                "Kubernetes Events dropped unqueued because the namespace that caused them was past its share of the queue (25 at once, 2 a second)",
                Counter::default(),
            ),
            policies: registry.add(
                "policies",
                "ImageSelectionPolicies by condition type and status",
                Family::default(),
            ),
            leader: registry.add(
                "leader",
                "1 while this replica holds the controller lease",
                Gauge::default(),
            ),
            placements: registry.add(
                "placements",
                "Gated pods decided by the placement controller, by outcome",
                Family::default(),
            ),
            exec_format_errors: registry.add(
                "exec_format_errors",
                "Containers of pods placement released that failed with exec format error (their node's CPU cannot run their image), each failed restart once",
                Counter::default(),
            ),
        }
    }
}
