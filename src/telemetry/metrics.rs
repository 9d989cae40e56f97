//! The Prometheus metrics of `ocifit run`: reconciles, artifact fetches, status writes, policies
//! by condition, leader status, the admission routes' answers and latency, the webhook's stores
//! and index rebuilds, placement decisions and the registry client's counters; [`features`] adds
//! what each feature's runbook reads and [`process`] the build, the process and the serving
//! certificate. Every label value is snake_case from a closed vocabulary, or names a policy or an
//! ArtifactCache: never a pod. [`exposition`] writes them as OpenMetrics or Prometheus text.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

mod admission;
mod controller;
pub(super) mod exposition;
mod features;
mod process;
mod steps;

pub use features::Controller;

pub use features::PolicyGates;
pub use process::Certificate;
pub use steps::StepTransfer;

/// How a reconcile ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReconcileResult {
    /// It did its work (or found nothing to do).
    Ok,
    /// Image selection: the artifact could not be had; the status says why.
    ArtifactError,
    /// It failed (the apiserver refused a read or write) and is retried with a backoff.
    Error,
    /// This replica is not the leader; nothing was done.
    NotLeader,
}

impl ReconcileResult {
    /// The `result` label.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Ok => "ok",
            ReconcileResult::ArtifactError => "artifact_error",
            ReconcileResult::Error => "error",
            ReconcileResult::NotLeader => "not_leader",
        }
    }

    /// `ok` or `error`, as a reconcile function returned.
    pub fn of<T, E>(result: &Result<T, E>) -> ReconcileResult {
        match result {
            Ok(_) => ReconcileResult::Ok,
            Err(_) => ReconcileResult::Error,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: &'static str,
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
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlacementLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    store: &'static str,
}

/// Reads extra metrics at scrape time (the registry client's counters).
pub type ScrapeFn = Box<dyn Fn(&mut DescriptorEncoder<'_>) -> fmt::Result + Send + Sync>;

/// The registry while the metrics are registered, noting each one's name, type and help.
struct Registering {
    registry: Registry,
    catalogue: Vec<(String, String, String)>,
}

impl Registering {
    /// Registers `metric` and hands it back, to be kept where it is updated.
    fn add<M: prometheus_client::registry::Metric + Clone>(
        &mut self,
        name: &str,
        help: &str,
        metric: M,
    ) -> M {
        let kind = metric.metric_type();
        // A counter's samples carry the suffix; its name in the registry does not.
        let suffix = if matches!(kind, MetricType::Counter) {
            "_total"
        } else {
            ""
        };
        self.catalogue.push((
            format!("ocifit_{name}{suffix}"),
            kind.as_str().to_owned(),
            help.to_owned(),
        ));
        self.registry.register(name, help, metric.clone());
        metric
    }
}

/// Every metric, registered once. Cheap to share in an `Arc`.
pub struct Metrics {
    registry: Registry,
    /// The `process_*` metrics, without the `ocifit_` prefix (Prometheus's own names for them).
    process: Registry,
    catalogue: Vec<(String, String, String)>,
    controller: controller::ControllerMetrics,
    admission: admission::AdmissionMetrics,
    features: features::FeatureGauges,
    steps: steps::StepMetrics,
    own: process::OwnMetrics,
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
    /// Registers every metric under the `ocifit` prefix (and the `process_*` ones without);
    /// `scrape` adds metrics read at scrape time.
    pub fn new(scrape: Option<ScrapeFn>) -> Arc<Metrics> {
        let mut registering = Registering {
            registry: Registry::with_prefix("ocifit"),
            catalogue: Vec::new(),
        };
        let controller = controller::ControllerMetrics::register(&mut registering);
        let admission = admission::AdmissionMetrics::register(&mut registering);
        let features = features::FeatureGauges::register(&mut registering);
        let steps = steps::StepMetrics::register(&mut registering);
        let own = process::OwnMetrics::register(&mut registering);
        let Registering {
            mut registry,
            catalogue,
        } = registering;
        if let Some(scrape) = scrape {
            registry.register_collector(Box::new(ScrapeCollector(Mutex::new(scrape))));
        }
        let mut process = Registry::default();
        process.register_collector(Box::new(process::ProcessCollector));
        Arc::new(Metrics {
            registry,
            process,
            catalogue,
            controller,
            admission,
            features,
            steps,
            own,
        })
    }

    /// Counts one placement decision (`Constrained`, `Unconstrained`, `Fallback`, `Held`, counted
    /// in snake_case).
    pub fn placement_decided(&self, outcome: &str) {
        self.controller
            .placements
            .get_or_create(&PlacementLabels {
                outcome: snake_case(outcome).into_owned(),
            })
            .inc();
    }

    /// Counts one container of a placed pod that failed with exec format error.
    pub fn exec_format_error(&self) {
        self.controller.exec_format_errors.inc();
    }

    /// Counts one running pod the placement audit found misplaced.
    pub fn misplaced_pod(&self) {
        self.controller.misplaced_pods.inc();
    }

    /// Counts one misplaced pod the placement audit evicted.
    pub fn misplaced_eviction(&self) {
        self.controller.misplaced_evictions.inc();
    }

    /// Counts one reconcile of `controller` and, unless it was skipped for not leading, its
    /// duration.
    pub fn reconciled(&self, controller: Controller, result: ReconcileResult, seconds: f64) {
        let controller = controller.as_str();
        self.controller
            .reconciles
            .get_or_create(&ResultLabels {
                controller,
                result: result.as_str(),
            })
            .inc();
        if result != ReconcileResult::NotLeader {
            self.controller
                .reconcile_duration
                .get_or_create(&ControllerLabels { controller })
                .observe(seconds);
        }
    }

    /// Counts one artifact resolution: `result` is `Ok` or the failure's condition reason
    /// (counted in snake_case).
    pub fn artifact_fetched(&self, result: &str) {
        self.controller
            .artifact_fetches
            .get_or_create(&FetchLabels {
                result: snake_case(result).into_owned(),
            })
            .inc();
    }

    /// Counts one status write.
    pub fn status_written(&self) {
        self.controller.status_writes.inc();
    }

    /// How many status writes this process made.
    pub fn status_writes(&self) -> u64 {
        self.controller.status_writes.get()
    }

    /// Counts one published Event.
    pub fn event_published(&self) {
        self.controller.events.inc();
    }

    /// Counts one Event dropped unpublished: its queue was full.
    pub fn event_dropped(&self) {
        self.controller.events_dropped.inc();
    }

    /// Counts one Event dropped unqueued: the namespace that caused it was past its share.
    pub fn event_over_quota(&self) {
        self.controller.events_over_quota.inc();
    }

    /// How many Events were dropped for a namespace past its share.
    pub fn events_over_quota(&self) -> u64 {
        self.controller.events_over_quota.get()
    }

    /// Replaces the ImageSelectionPolicies-by-condition gauges with `counts` ((type, status) →
    /// policies), both counted in snake_case (`Ready`, `True` → `ready`, `true`).
    pub fn set_policies<'a>(&self, counts: impl IntoIterator<Item = ((&'a str, &'a str), i64)>) {
        self.controller.policies.clear();
        for ((condition, status), n) in counts {
            self.controller
                .policies
                .get_or_create(&ConditionLabels {
                    condition: snake_case(condition).into_owned(),
                    status: snake_case(status).into_owned(),
                })
                .set(n);
        }
    }

    /// Adds `bytes` (negative: gives back) to the admission bodies held now.
    pub fn hold_admission_body_bytes(&self, bytes: i64) {
        self.admission.body_bytes.inc_by(bytes);
    }

    /// Records whether this replica leads.
    pub fn set_leader(&self, leader: bool) {
        self.controller.leader.set(i64::from(leader));
    }

    /// Counts one admission request answered on `route` (its path) and its latency; `outcome`
    /// and `reason` come from the vocabulary of the planner that answered (or the admission
    /// host's own refusals).
    pub fn admitted(&self, route: &str, outcome: &'static str, reason: &'static str, seconds: f64) {
        self.admission
            .admissions
            .get_or_create(&AdmissionLabels {
                route: route.to_owned(),
                outcome,
                reason: snake_case(reason).into_owned(),
            })
            .inc();
        self.admission
            .duration
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
        self.admission
            .store_objects
            .get_or_create(&StoreLabels { store })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts one rebuild of the webhook's planner index.
    pub fn index_rebuilt(&self) {
        self.admission.index_rebuilds.inc();
    }

    /// How many times the webhook's planner index was built.
    pub fn index_rebuilds(&self) -> u64 {
        self.admission.index_rebuilds.get()
    }

    /// Every registered metric's name as a scrape shows it (a counter with `_total`), its type
    /// and its help, whether or not it has a sample yet (a scrape leaves out a family without
    /// one; scrape-time metrics are in the exposition).
    pub fn catalogue(&self) -> &[(String, String, String)] {
        &self.catalogue
    }

    /// The OpenMetrics text exposition of every metric (`# EOF` last).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::new();
        encode_registry(&mut out, &self.process)?;
        encode_registry(&mut out, &self.registry)?;
        encode_eof(&mut out)?;
        Ok(out)
    }
}

/// `value` in snake_case (`ArtifactNotFound` → `artifact_not_found`, `TLSError` → `tls_error`):
/// the label values of the names ocifit's Events and conditions spell in CamelCase.
pub fn snake_case(value: &str) -> Cow<'_, str> {
    if !value.bytes().any(|b| b.is_ascii_uppercase()) {
        return Cow::Borrowed(value);
    }
    // By byte, as only ASCII letters and digits decide a boundary (no byte of a non-ASCII
    // character is one), and without a copy of the characters: this runs on every admission.
    let bytes = value.as_bytes();
    let mut out = String::with_capacity(value.len() + 4);
    for (i, c) in value.char_indices() {
        if c.is_ascii_uppercase() {
            let previous = i.checked_sub(1).and_then(|p| bytes.get(p));
            let next_lower = bytes.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            let boundary = previous.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_ascii_uppercase() && next_lower)
            });
            if boundary {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
