//! What workflow steps moved: each finished helper container of a step's pod (its pulls before
//! the step, its pushes after) counted once by the artifact cache, by cache and direction, with
//! its bytes and the time its transfers took.
//!
//! The `cache` label is the cache's own `namespace/name` (the artifact cache reads it from the
//! ArtifactCache object, never from the pod), so a value is at most 317 bytes; at most
//! [`STEP_CACHE_SERIES`] caches have series of their own, later ones are counted under
//! [`OTHER_CACHES`], and a cache's series go with it ([`Metrics::keep_step_caches`]).

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::{Metrics, Registering};

/// The most caches with series of their own: each costs 2 counters and a 17-bucket histogram per
/// direction, so this bounds what steps add to every scrape whatever tenants create.
pub(super) const STEP_CACHE_SERIES: usize = 256;

/// The `cache` label of steps whose cache came after [`STEP_CACHE_SERIES`] others; no cache's
/// `namespace/name` can be spelt so.
pub(super) const OTHER_CACHES: &str = "(other)";

/// The `cache` label of steps that name their own registry.
const NO_CACHE: &str = "";

const DIRECTIONS: [&str; 2] = ["pull", "push"];
const OUTCOMES: [&str; 2] = ["ok", "failed"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    cache: String,
    direction: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    cache: String,
    direction: &'static str,
}

fn duration_histogram() -> Histogram {
    // From a small file next to the cache up to gigabytes.
    Histogram::new(exponential_buckets(0.01, 2.0, 17))
}

/// One finished helper container's transfers.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTransfer<'a> {
    /// The ArtifactCache as `namespace/name`, from the cache object; empty for a step naming its
    /// own registry.
    pub cache: &'a str,
    /// `pull` or `push`.
    pub direction: &'static str,
    pub ok: bool,
    pub bytes: u64,
    pub seconds: f64,
}

/// The metrics of this file, registered beside the others.
pub(super) struct StepMetrics {
    steps: Family<StepLabels, Counter>,
    bytes: Family<DirectionLabels, Counter>,
    duration: Family<DirectionLabels, Histogram, fn() -> Histogram>,
    /// The caches with series of their own.
    caches: Mutex<BTreeSet<String>>,
}

impl StepMetrics {
    pub(super) fn register(registry: &mut Registering) -> StepMetrics {
        StepMetrics {
            steps: registry.add(
                "artifact_steps",
                "Finished helper containers of workflow steps, by cache, direction (pull: inputs before the step; push: outputs after it) and outcome (ok or failed); leader only",
                Family::default(),
            ),
            bytes: registry.add(
                "artifact_step_bytes",
                "Bytes of the layers workflow steps' helpers pulled or pushed, by cache and direction; leader only",
                Family::default(),
            ),
            duration: registry.add(
                "artifact_step_duration_seconds",
                "Time one step's helper spent pulling or pushing, by cache and direction; leader only",
                Family::new_with_constructor(duration_histogram),
            ),
            caches: Mutex::new(BTreeSet::new()),
        }
    }

    /// The label `cache` is counted under: its own while it has series or there is room.
    fn label(&self, cache: &str) -> String {
        if cache == NO_CACHE {
            return NO_CACHE.to_owned();
        }
        let mut caches = self.caches.lock().unwrap_or_else(PoisonError::into_inner);
        if caches.contains(cache) || caches.len() < STEP_CACHE_SERIES {
            caches.insert(cache.to_owned());
            cache.to_owned()
        } else {
            OTHER_CACHES.to_owned()
        }
    }

    fn remove(&self, cache: &str) {
        for direction in DIRECTIONS {
            for outcome in OUTCOMES {
                let cache = cache.to_owned();
                self.steps.remove(&StepLabels {
                    cache,
                    direction,
                    outcome,
                });
            }
            let labels = DirectionLabels {
                cache: cache.to_owned(),
                direction,
            };
            self.bytes.remove(&labels);
            self.duration.remove(&labels);
        }
    }
}

impl Metrics {
    /// Counts one finished helper container of a step.
    pub fn step_transferred(&self, transfer: &StepTransfer<'_>) {
        let steps = &self.steps;
        let cache = steps.label(transfer.cache);
        steps
            .steps
            .get_or_create(&StepLabels {
                cache: cache.clone(),
                direction: transfer.direction,
                outcome: if transfer.ok { "ok" } else { "failed" },
            })
            .inc();
        let labels = DirectionLabels {
            cache,
            direction: transfer.direction,
        };
        steps.bytes.get_or_create(&labels).inc_by(transfer.bytes);
        steps
            .duration
            .get_or_create(&labels)
            .observe(transfer.seconds);
    }

    /// Removes the series of every cache not in `live` (`namespace/name` of the caches that
    /// exist), making room for others.
    pub fn keep_step_caches(&self, live: &BTreeSet<String>) {
        let steps = &self.steps;
        let gone: Vec<String> = {
            let mut caches = steps.caches.lock().unwrap_or_else(PoisonError::into_inner);
            let gone = caches.difference(live).cloned().collect();
            caches.retain(|cache| live.contains(cache));
            gone
        };
        for cache in gone {
            steps.remove(&cache);
        }
    }
}
