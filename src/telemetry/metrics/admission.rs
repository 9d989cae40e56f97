//! The admission host's metrics: request bodies held, answers by route, outcome and reason, their
//! latency, and the stores and index the webhook plans from.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::{AdmissionLabels, Registering, RouteLabels, StoreLabels};

pub(super) struct AdmissionMetrics {
    pub body_bytes: Gauge,
    pub admissions: Family<AdmissionLabels, Counter>,
    pub duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
    pub store_objects: Family<StoreLabels, Gauge>,
    pub index_rebuilds: Counter,
}

/// The admission latency buckets: from well under a typical admission, doubling to past the
/// host's deadline.
fn admission_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_025, 2.0, 18))
}

impl AdmissionMetrics {
    pub(super) fn register(registry: &mut Registering) -> AdmissionMetrics {
        AdmissionMetrics {
            body_bytes: registry.add(
                "admission_body_bytes",
                "Bytes of admission request bodies held now, out of the host's 48 MiB for them",
                Gauge::default(),
            ),
            admissions: registry.add(
                "admissions",
                "Admission requests answered, by route (webhook path), outcome and reason",
                Family::default(),
            ),
            duration: registry.add(
                "admission_duration_seconds",
                "Time from receiving an admission request to its answer (body read, plan, encode), by route",
                Family::new_with_constructor(admission_histogram),
            ),
            store_objects: registry.add(
                "store_objects",
                "Objects in the in-memory stores ocifit plans from, by store (policies, nodes, node_features: image selection's webhook; placement_pods: the pods placement's watch holds)",
                Family::default(),
            ),
            index_rebuilds: registry.add(
                "webhook_index_rebuilds",
                "Rebuilds of the webhook's planner index after a store change",
                Counter::default(),
            ),
        }
    }
}
