//! What workflow steps moved: each finished helper container of a step's pod (its pulls before
//! the step, its pushes after) counted once by the artifact cache, by cache and direction, with
//! its bytes and the time its transfers took.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::{Metrics, Registering};

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
    // 10 ms to about 11 minutes: a small file next to the cache, up to gigabytes.
    Histogram::new(exponential_buckets(0.01, 2.0, 17))
}

/// One finished helper container's transfers.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTransfer<'a> {
    /// The ArtifactCache as `namespace/name`; empty for a step naming its own registry.
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
        }
    }
}

impl Metrics {
    /// Counts one finished helper container of a step.
    pub fn step_transferred(&self, transfer: &StepTransfer<'_>) {
        let steps = &self.steps;
        steps
            .steps
            .get_or_create(&StepLabels {
                cache: transfer.cache.to_owned(),
                direction: transfer.direction,
                outcome: if transfer.ok { "ok" } else { "failed" },
            })
            .inc();
        let labels = DirectionLabels {
            cache: transfer.cache.to_owned(),
            direction: transfer.direction,
        };
        steps.bytes.get_or_create(&labels).inc_by(transfer.bytes);
        steps
            .duration
            .get_or_create(&labels)
            .observe(transfer.seconds);
    }
}
