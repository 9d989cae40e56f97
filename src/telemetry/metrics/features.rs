//! What each feature's runbook reads beside the counters: the pods placement still gates by
//! policy (waiting and held), when the oldest waiting one was created and the policy's bound,
//! PlacementPolicies and ArtifactCaches by readiness, and each feature's last successful
//! reconcile. Gauges derived from a store are replaced whole, so a policy that is gone leaves no
//! series behind.

use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::{ControllerLabels, Metrics, Registering};

/// A feature's controller, as the `controller` label names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Controller {
    ImageSelection,
    Placement,
    ArtifactCache,
}

impl Controller {
    pub const fn as_str(self) -> &'static str {
        match self {
            Controller::ImageSelection => "image_selection",
            Controller::Placement => "placement",
            Controller::ArtifactCache => "artifact_cache",
        }
    }
}

/// One PlacementPolicy's pods that still carry the scheduling gate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyGates {
    /// Waiting for inspection.
    pub gated: i64,
    /// Gated on purpose (outcome `Held`).
    pub held: i64,
    /// When the oldest pod waiting for inspection was created, in seconds since the epoch.
    pub oldest_gated_created: Option<f64>,
    /// How long a pod may wait before the policy gives up on inspecting it (its failure bound's
    /// time); `None` when the policy is gone or cannot be read.
    pub bound_seconds: Option<f64>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyStateLabels {
    policy: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadyLabels {
    ready: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

type SecondsGauge = Gauge<f64, AtomicU64>;

/// The gauges of this file, registered beside the others.
pub(super) struct FeatureGauges {
    placement_pods: Family<PolicyStateLabels, Gauge>,
    oldest_gated: Family<PolicyLabels, SecondsGauge>,
    gate_bound: Family<PolicyLabels, SecondsGauge>,
    placement_policies: Family<ReadyLabels, Gauge>,
    artifact_caches: Family<ReadyLabels, Gauge>,
    last_success: Family<ControllerLabels, SecondsGauge>,
    inspection_failures: Family<KindLabels, Counter>,
}

impl FeatureGauges {
    pub(super) fn register(registry: &mut Registering) -> FeatureGauges {
        FeatureGauges {
            placement_pods: registry.add(
                "placement_pods",
                "Pods a PlacementPolicy still gates, by policy and state (gated: waiting for inspection; held: gated on purpose); leader only",
                Family::default(),
            ),
            oldest_gated: registry.add(
                "placement_oldest_gated_pod_created_timestamp_seconds",
                "Creation time of the oldest pod still waiting for inspection, by policy; leader only",
                Family::default(),
            ),
            gate_bound: registry.add(
                "placement_gate_bound_seconds",
                "How long a PlacementPolicy lets a pod wait for inspection before giving up (onInspectionFailure.timeout); leader only",
                Family::default(),
            ),
            placement_policies: registry.add(
                "placement_policies",
                "PlacementPolicies by their Ready condition (true or false); leader only",
                Family::default(),
            ),
            artifact_caches: registry.add(
                "artifact_caches",
                "ArtifactCaches by readiness (true: Ready and current; false: anything else)",
                Family::default(),
            ),
            last_success: registry.add(
                "last_successful_reconcile_timestamp_seconds",
                "When a controller last finished a reconcile that did its work, by controller",
                Family::default(),
            ),
            inspection_failures: registry.add(
                "placement_inspection_failures",
                "Failed image inspections of gated pods' containers, by kind (the registry error's kind, backing_off or invalid_reference)",
                Family::default(),
            ),
        }
    }
}

fn set_ready(family: &Family<ReadyLabels, Gauge>, ready: usize, not_ready: usize) {
    for (label, n) in [("true", ready), ("false", not_ready)] {
        family
            .get_or_create(&ReadyLabels { ready: label })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

impl Metrics {
    /// Replaces placement's per-policy gauges with `policies` (the leader's view).
    pub fn set_placement<'a>(&self, policies: impl IntoIterator<Item = (&'a str, PolicyGates)>) {
        self.clear_placement();
        let gauges = &self.features;
        for (policy, gates) in policies {
            for (state, n) in [("gated", gates.gated), ("held", gates.held)] {
                gauges
                    .placement_pods
                    .get_or_create(&PolicyStateLabels {
                        policy: policy.to_owned(),
                        state,
                    })
                    .set(n);
            }
            let labels = PolicyLabels {
                policy: policy.to_owned(),
            };
            if let Some(created) = gates.oldest_gated_created {
                gauges.oldest_gated.get_or_create(&labels).set(created);
            }
            if let Some(bound) = gates.bound_seconds {
                gauges.gate_bound.get_or_create(&labels).set(bound);
            }
        }
    }

    /// Drops placement's per-policy gauges (a replica that stops leading stops reporting them).
    pub fn clear_placement(&self) {
        self.features.placement_pods.clear();
        self.features.oldest_gated.clear();
        self.features.gate_bound.clear();
        self.features.placement_policies.clear();
    }

    /// Records how many PlacementPolicies are Ready and how many are not.
    pub fn set_placement_policies(&self, ready: usize, not_ready: usize) {
        set_ready(&self.features.placement_policies, ready, not_ready);
    }

    /// Records how many ArtifactCaches are Ready and how many are not.
    pub fn set_artifact_caches(&self, ready: usize, not_ready: usize) {
        set_ready(&self.features.artifact_caches, ready, not_ready);
    }

    /// Counts one failed inspection of a gated pod's image, by `kind` of failure.
    pub fn inspection_failed(&self, kind: &'static str) {
        self.features
            .inspection_failures
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    /// Records that `controller` just finished a reconcile that did its work.
    pub fn reconcile_succeeded(&self, controller: Controller) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        self.features
            .last_success
            .get_or_create(&ControllerLabels {
                controller: controller.as_str(),
            })
            .set(now);
    }
}
