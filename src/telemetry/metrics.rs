//! The Prometheus metrics of `ocifit run`, in the text exposition format: reconciles by result and
//! their duration, artifact fetches, status writes, policies by condition, leader status, the
//! admission routes' answers by route, outcome and reason and their latency, the sizes of the
//! stores the webhook plans from and its index rebuilds, placement decisions, and (collected at
//! scrape time) the registry client's request and cache counters; [`features`] adds what each
//! feature's runbook reads (gated and held pods, caches by readiness, last successful reconcile).
//! Every label value comes from a closed vocabulary or names a policy or an ArtifactCache: never a pod.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod features;
mod steps;

pub use features::{Feature, PolicyGates};
pub use steps::StepTransfer;

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
    route: String,
    outcome: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

/// The admission latency buckets: from 25 µs (an admission is expected well under a
/// millisecond) doubling to 3.3 s, past the host's 2 s deadline.
fn admission_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_025, 2.0, 18))
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

/// The registry while the metrics are registered, noting each one's name and type.
struct Registering {
    registry: Registry,
    catalogue: Vec<(String, String)>,
}

impl Registering {
    fn add(&mut self, name: &str, help: &str, metric: impl prometheus_client::registry::Metric) {
        let kind = metric.metric_type();
        // A counter's samples carry the suffix; its name in the registry does not.
        let suffix = if matches!(kind, MetricType::Counter) {
            "_total"
        } else {
            ""
        };
        self.catalogue
            .push((format!("ocifit_{name}{suffix}"), kind.as_str().to_owned()));
        self.registry.register(name, help, metric);
    }
}

/// Every metric, registered once. Cheap to share in an `Arc`.
pub struct Metrics {
    registry: Registry,
    catalogue: Vec<(String, String)>,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_duration: Histogram,
    artifact_fetches: Family<FetchLabels, Counter>,
    status_writes: Counter,
    events: Counter,
    policies: Family<ConditionLabels, Gauge>,
    leader: Gauge,
    admission_body_bytes: Gauge,
    admissions: Family<AdmissionLabels, Counter>,
    admission_duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
    store_objects: Family<StoreLabels, Gauge>,
    index_rebuilds: Counter,
    placements: Family<PlacementLabels, Counter>,
    features: features::FeatureGauges,
    steps: steps::StepMetrics,
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
        let mut registry = Registering {
            registry: Registry::with_prefix("ocifit"),
            catalogue: Vec::new(),
        };
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.add(
            "reconciles",
            "Reconciles of ImageSelectionPolicies, by result",
            reconciles.clone(),
        );
        let reconcile_duration = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        registry.add(
            "reconcile_duration_seconds",
            "Time to reconcile one ImageSelectionPolicy",
            reconcile_duration.clone(),
        );
        let artifact_fetches = Family::<FetchLabels, Counter>::default();
        registry.add(
            "artifact_fetches",
            "Compatibility artifact resolutions against the registry, by result (Ok or the condition reason)",
            artifact_fetches.clone(),
        );
        let status_writes = Counter::default();
        registry.add(
            "status_writes",
            "Policy status writes (server-side apply); a pass with nothing new writes nothing",
            status_writes.clone(),
        );
        let events = Counter::default();
        registry.add(
            "events",
            "Kubernetes Events published, on every object ocifit reports on (policies, gated pods and their owners, artifact caches)",
            events.clone(),
        );
        let policies = Family::<ConditionLabels, Gauge>::default();
        registry.add(
            "policies",
            "ImageSelectionPolicies by condition type and status",
            policies.clone(),
        );
        let leader = Gauge::default();
        registry.add(
            "leader",
            "1 while this replica holds the controller lease",
            leader.clone(),
        );
        let admission_body_bytes = Gauge::default();
        registry.add(
            "admission_body_bytes",
            "Bytes of admission request bodies held now, out of the host's 48 MiB for them",
            admission_body_bytes.clone(),
        );
        let admissions = Family::<AdmissionLabels, Counter>::default();
        registry.add(
            "admissions",
            "Admission requests answered, by route (webhook path), outcome and reason",
            admissions.clone(),
        );
        let admission_duration =
            Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                admission_histogram,
            );
        registry.add(
            "admission_duration_seconds",
            "Time from receiving an admission request to its answer (body read, plan, encode), by route",
            admission_duration.clone(),
        );
        let store_objects = Family::<StoreLabels, Gauge>::default();
        registry.add(
            "store_objects",
            "Objects in the in-memory stores the webhook plans from (policies, nodes, node_features)",
            store_objects.clone(),
        );
        let index_rebuilds = Counter::default();
        registry.add(
            "webhook_index_rebuilds",
            "Rebuilds of the webhook's planner index after a store change",
            index_rebuilds.clone(),
        );
        let placements = Family::<PlacementLabels, Counter>::default();
        registry.add(
            "placements",
            "Gated pods decided by the placement controller, by outcome",
            placements.clone(),
        );
        let features = features::FeatureGauges::register(&mut registry);
        let steps = steps::StepMetrics::register(&mut registry);
        if let Some(scrape) = scrape {
            registry
                .registry
                .register_collector(Box::new(ScrapeCollector(Mutex::new(scrape))));
        }
        let Registering {
            registry,
            catalogue,
        } = registry;
        Arc::new(Metrics {
            registry,
            catalogue,
            reconciles,
            reconcile_duration,
            artifact_fetches,
            status_writes,
            events,
            policies,
            leader,
            admission_body_bytes,
            admissions,
            admission_duration,
            store_objects,
            index_rebuilds,
            placements,
            features,
            steps,
        })
    }

    /// Counts one placement decision (`Constrained`, `Unconstrained`, `Fallback`, `Held`).
    pub fn placement_decided(&self, outcome: &'static str) {
        self.placements
            .get_or_create(&PlacementLabels { outcome })
            .inc();
    }

    /// Counts one reconcile of an ImageSelectionPolicy and its duration; an `Ok` one is image
    /// selection's last successful reconcile.
    pub fn reconciled(&self, result: ReconcileResult, seconds: f64) {
        self.reconciles
            .get_or_create(&ResultLabels { result })
            .inc();
        if result != ReconcileResult::NotLeader {
            self.reconcile_duration.observe(seconds);
        }
        if result == ReconcileResult::Ok {
            self.reconcile_succeeded(features::Feature::ImageSelection);
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

    /// Adds `bytes` (negative: gives back) to the admission bodies held now.
    pub fn hold_admission_body_bytes(&self, bytes: i64) {
        self.admission_body_bytes.inc_by(bytes);
    }

    /// Records whether this replica leads.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Counts one admission request answered on `route` (its path) and its latency; `outcome`
    /// and `reason` come from the vocabulary of the planner that answered (or the admission
    /// host's own refusals).
    pub fn admitted(&self, route: &str, outcome: &'static str, reason: &'static str, seconds: f64) {
        self.admissions
            .get_or_create(&AdmissionLabels {
                route: route.to_owned(),
                outcome,
                reason,
            })
            .inc();
        self.admission_duration
            .get_or_create(&RouteLabels {
                route: route.to_owned(),
            })
            .observe(seconds);
    }

    /// Records the sizes of the stores the webhook plans from.
    pub fn set_store_sizes(&self, policies: usize, nodes: usize, node_features: usize) {
        for (store, n) in [
            ("policies", policies),
            ("nodes", nodes),
            ("node_features", node_features),
        ] {
            self.set_store_size(store, n);
        }
    }

    /// Records how many objects one store holds.
    pub fn set_store_size(&self, store: &'static str, n: usize) {
        self.store_objects
            .get_or_create(&StoreLabels { store })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts one rebuild of the webhook's planner index.
    pub fn index_rebuilt(&self) {
        self.index_rebuilds.inc();
    }

    /// How many times the webhook's planner index was built.
    pub fn index_rebuilds(&self) -> u64 {
        self.index_rebuilds.get()
    }

    /// Every registered metric's name as a scrape shows it (a counter with `_total`) and its
    /// type, whether or not it has a sample yet (scrape-time metrics are in the exposition).
    pub fn catalogue(&self) -> &[(String, String)] {
        &self.catalogue
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
