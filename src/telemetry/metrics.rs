//! The Prometheus metrics of `ocifit run`, in the text exposition format: reconciles by result and
//! their duration, artifact fetches, status writes, policies by condition, leader status, the
//! webhook's admissions by outcome and their latency, the sizes of the stores it plans from and
//! its index rebuilds, placement decisions, and (collected at scrape time) the registry client's request and cache
//! counters.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// How a reconcile ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum ReconcileResult {
    /// The status was computed and written (or already current).
    Ok,
    /// The artifact could not be had; the status says why.
    ArtifactError,
    /// The apiserver refused a read or write.
    ApiError,
    /// This replica is not the leader; nothing was done.
    NotLeader,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: ReconcileResult,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FetchLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    condition: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AdmissionLabels {
    outcome: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlacementLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    store: &'static str,
}

/// Reads extra metrics at scrape time (the registry client's counters).
pub type ScrapeFn = Box<dyn Fn(&mut DescriptorEncoder<'_>) -> fmt::Result + Send + Sync>;

/// Every metric, registered once. Cheap to share in an `Arc`.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_duration: Histogram,
    artifact_fetches: Family<FetchLabels, Counter>,
    status_writes: Counter,
    events: Counter,
    policies: Family<ConditionLabels, Gauge>,
    leader: Gauge,
    admissions: Family<AdmissionLabels, Counter>,
    admission_duration: Histogram,
    store_objects: Family<StoreLabels, Gauge>,
    index_rebuilds: Counter,
    placements: Family<PlacementLabels, Counter>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Adapts a scrape function to prometheus-client's collector interface.
struct ScrapeCollector(Mutex<ScrapeFn>);

impl fmt::Debug for ScrapeCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ScrapeCollector")
    }
}

impl Collector for ScrapeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let scrape = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        scrape(&mut encoder)
    }
}

impl Metrics {
    /// Registers every metric under the `ocifit` prefix; `scrape` adds metrics read at scrape time.
    pub fn new(scrape: Option<ScrapeFn>) -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("ocifit");
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles of ImageSelectionPolicies, by result",
            reconciles.clone(),
        );
        let reconcile_duration = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        registry.register(
            "reconcile_duration_seconds",
            "Time to reconcile one ImageSelectionPolicy",
            reconcile_duration.clone(),
        );
        let artifact_fetches = Family::<FetchLabels, Counter>::default();
        registry.register(
            "artifact_fetches",
            "Compatibility artifact resolutions against the registry, by result (Ok or the condition reason)",
            artifact_fetches.clone(),
        );
        let status_writes = Counter::default();
        registry.register(
            "status_writes",
            "Policy status writes (server-side apply); a pass with nothing new writes nothing",
            status_writes.clone(),
        );
        let events = Counter::default();
        registry.register(
            "events",
            "Kubernetes Events published on policies",
            events.clone(),
        );
        let policies = Family::<ConditionLabels, Gauge>::default();
        registry.register(
            "policies",
            "ImageSelectionPolicies by condition type and status",
            policies.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the controller lease",
            leader.clone(),
        );
        let admissions = Family::<AdmissionLabels, Counter>::default();
        registry.register(
            "admissions",
            "Pod admission requests answered by the webhook, by outcome and reason",
            admissions.clone(),
        );
        // From 25 µs: an admission is expected well under a millisecond.
        let admission_duration = Histogram::new(exponential_buckets(0.000_025, 2.0, 18));
        registry.register(
            "admission_duration_seconds",
            "Time from receiving an admission request to its answer (body read, plan, encode)",
            admission_duration.clone(),
        );
        let store_objects = Family::<StoreLabels, Gauge>::default();
        registry.register(
            "store_objects",
            "Objects in the in-memory stores the webhook plans from (policies, nodes, node_features)",
            store_objects.clone(),
        );
        let index_rebuilds = Counter::default();
        registry.register(
            "webhook_index_rebuilds",
            "Rebuilds of the webhook's planner index after a store change",
            index_rebuilds.clone(),
        );
        let placements = Family::<PlacementLabels, Counter>::default();
        registry.register(
            "placements",
            "Gated pods decided by the placement controller, by outcome",
            placements.clone(),
        );
        if let Some(scrape) = scrape {
            registry.register_collector(Box::new(ScrapeCollector(Mutex::new(scrape))));
        }
        Arc::new(Metrics {
            registry,
            reconciles,
            reconcile_duration,
            artifact_fetches,
            status_writes,
            events,
            policies,
            leader,
            admissions,
            admission_duration,
            store_objects,
            index_rebuilds,
            placements,
        })
    }

    /// Counts one placement decision (`Constrained`, `Unconstrained`, `Fallback`, `Held`).
    pub fn placement_decided(&self, outcome: &'static str) {
        self.placements
            .get_or_create(&PlacementLabels { outcome })
            .inc();
    }

    /// Counts one reconcile and its duration.
    pub fn reconciled(&self, result: ReconcileResult, seconds: f64) {
        self.reconciles
            .get_or_create(&ResultLabels { result })
            .inc();
        if result != ReconcileResult::NotLeader {
            self.reconcile_duration.observe(seconds);
        }
    }

    /// Counts one artifact resolution: `result` is `Ok` or the failure's condition reason.
    pub fn artifact_fetched(&self, result: &str) {
        self.artifact_fetches
            .get_or_create(&FetchLabels {
                result: result.to_owned(),
            })
            .inc();
    }

    /// Counts one status write.
    pub fn status_written(&self) {
        self.status_writes.inc();
    }

    /// How many status writes this process made.
    pub fn status_writes(&self) -> u64 {
        self.status_writes.get()
    }

    /// Counts one published Event.
    pub fn event_published(&self) {
        self.events.inc();
    }

    /// Replaces the policies-by-condition gauges with `counts` ((type, status) → policies).
    pub fn set_policies<'a>(&self, counts: impl IntoIterator<Item = ((&'a str, &'a str), i64)>) {
        self.policies.clear();
        for ((condition, status), n) in counts {
            self.policies
                .get_or_create(&ConditionLabels {
                    condition: condition.to_owned(),
                    status: status.to_owned(),
                })
                .set(n);
        }
    }

    /// Records whether this replica leads.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Counts one answered admission request and its latency; `outcome` and `reason` come from
    /// the vocabulary of the planner that answered (or the admission host's own refusals).
    pub fn admitted(&self, outcome: &'static str, reason: &'static str, seconds: f64) {
        self.admissions
            .get_or_create(&AdmissionLabels { outcome, reason })
            .inc();
        self.admission_duration.observe(seconds);
    }

    /// Records the sizes of the stores the webhook plans from.
    pub fn set_store_sizes(&self, policies: usize, nodes: usize, node_features: usize) {
        for (store, n) in [
            ("policies", policies),
            ("nodes", nodes),
            ("node_features", node_features),
        ] {
            self.store_objects
                .get_or_create(&StoreLabels { store })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Counts one rebuild of the webhook's planner index.
    pub fn index_rebuilt(&self) {
        self.index_rebuilds.inc();
    }

    /// How many times the webhook's planner index was built.
    pub fn index_rebuilds(&self) -> u64 {
        self.index_rebuilds.get()
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_writes_policies_and_leader_appear_in_the_exposition() {
        let metrics = Metrics::new(None);
        metrics.reconciled(ReconcileResult::Ok, 0.002);
        metrics.reconciled(ReconcileResult::ArtifactError, 0.5);
        metrics.artifact_fetched("RegistryUnavailable");
        metrics.status_written();
        metrics.set_policies([(("Ready", "True"), 2), (("Degraded", "True"), 1)]);
        metrics.set_leader(true);
        let text = metrics.encode().unwrap();
        for line in [
            "ocifit_reconciles_total{result=\"Ok\"} 1",
            "ocifit_reconciles_total{result=\"ArtifactError\"} 1",
            "ocifit_reconcile_duration_seconds_count 2",
            "ocifit_artifact_fetches_total{result=\"RegistryUnavailable\"} 1",
            "ocifit_status_writes_total 1",
            "ocifit_policies{condition=\"Ready\",status=\"True\"} 2",
            "ocifit_policies{condition=\"Degraded\",status=\"True\"} 1",
            "ocifit_leader 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert_eq!(metrics.status_writes(), 1);
    }

    #[test]
    fn admissions_store_sizes_and_rebuilds_appear_with_sub_millisecond_buckets() {
        let metrics = Metrics::new(None);
        metrics.admitted("pinned", "ImagePinned", 0.0001);
        metrics.admitted("denied", "Unpinned", 0.0002);
        metrics.set_store_sizes(2, 5000, 0);
        metrics.index_rebuilt();
        let text = metrics.encode().unwrap();
        for line in [
            "ocifit_admissions_total{outcome=\"pinned\",reason=\"ImagePinned\"} 1",
            "ocifit_admissions_total{outcome=\"denied\",reason=\"Unpinned\"} 1",
            "ocifit_admission_duration_seconds_count 2",
            "ocifit_admission_duration_seconds_bucket{le=\"0.0001\"} 1",
            "ocifit_store_objects{store=\"nodes\"} 5000",
            "ocifit_store_objects{store=\"node_features\"} 0",
            "ocifit_webhook_index_rebuilds_total 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn policy_gauges_are_replaced_not_accumulated() {
        let metrics = Metrics::new(None);
        metrics.set_policies([(("Ready", "False"), 1)]);
        metrics.set_policies([(("Ready", "True"), 1)]);
        let text = metrics.encode().unwrap();
        assert!(!text.contains("status=\"False\""), "{text}");
    }

    #[test]
    fn scrape_time_metrics_are_included() {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        let metrics = Metrics::new(Some(Box::new(|encoder| {
            let counter = ConstCounter::new(7u64);
            let metric = encoder.encode_descriptor(
                "registry_requests",
                "Registry requests",
                None,
                counter.metric_type(),
            )?;
            counter.encode(metric)
        })));
        let text = metrics.encode().unwrap();
        assert!(text.contains("ocifit_registry_requests_total 7"), "{text}");
    }
}
