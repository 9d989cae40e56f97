//! A pod's way through ocifit's gate. Held ([`hold`]): admitted with the scheduling gate (the
//! scheduler leaves it alone) and the held label (the controller watches only such pods), nothing
//! else, and nothing more when reinvoked on its own output. Released: the planner's decision for
//! the pod as it is now ([`Index::plan_pod`], the very function admission calls), written as one
//! guarded JSON patch against the live pod (images, pinning, decision annotations, gate and held
//! label removed) carrying the resourceVersion it was planned from. A pod still undecidable waits
//! until the hold bound, then follows the hold failure rule; a decision that would have refused
//! it follows that rule at once (an admitted pod cannot be refused). Pure: time passed in.

use std::sync::Arc;
use std::time::Duration;

use json_patch::{Patch, PatchOperation};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::managed::{Quota, managed_policy};
use super::{DenyReason, ImagePlan, Index};
use crate::admission::add_op;
use crate::api::ImageSelectionPolicy;
use crate::api::pod::{HELD_ANNOTATION, HELD_LABEL, SCHEDULING_GATE};

use crate::cluster::Mark;
use crate::cluster::{Gate, guarded, held_at};

pub use crate::cluster::HoldFailure;

/// Image selection's scheduling gate, on every pod it holds (each carries the held label).
pub const GATE: Gate = Gate {
    name: SCHEDULING_GATE,
    label: HELD_LABEL,
};

/// The plan holding `pod` because of `reason` (one that waits).
pub(crate) fn hold(
    pod: &Pod,
    policy: Option<Arc<ImageSelectionPolicy>>,
    reason: DenyReason,
) -> ImagePlan {
    let mut ops = Vec::new();
    let gates = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref());
    if gate_at(pod).is_none() {
        let gate = json!({ "name": SCHEDULING_GATE });
        ops.push(match gates {
            None => add_op(&["spec", "schedulingGates"], Value::Array(vec![gate])),
            Some(_) => add_op(&["spec", "schedulingGates", "-"], gate),
        });
    }
    let labels = pod.metadata.labels.as_ref();
    if labels
        .and_then(|labels| labels.get(HELD_LABEL))
        .map(String::as_str)
        != Some("true")
    {
        ops.push(match labels {
            None => add_op(&["metadata", "labels"], json!({ HELD_LABEL: "true" })),
            Some(_) => add_op(&["metadata", "labels", HELD_LABEL], Value::from("true")),
        });
    }
    ImagePlan::Hold {
        policy,
        reason,
        patch: Patch(ops),
    }
}

/// The warning a held pod's creator sees.
pub(super) fn warning(reason: &DenyReason) -> String {
    format!("held by scheduling gate {SCHEDULING_GATE} until ocifit can choose its image: {reason}")
}

/// Where ocifit's gate is in the pod's scheduling gates, if there.
pub(crate) fn gate_at(pod: &Pod) -> Option<usize> {
    held_at(pod, GATE)
}

/// How long a pod may be held, and what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldRules {
    /// From the pod's creation.
    pub bound: Duration,
    /// What follows it.
    pub failure: HoldFailure,
    /// Whether ocifit takes charge of a policy for an `image-ref` no policy uses.
    pub take_charge: bool,
    /// How long such a policy stays once no pod uses it.
    pub collect_after: Duration,
    /// How many such policies may exist.
    pub quota: Quota,
}

/// An Event on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    /// Warning, else Normal.
    pub warning: bool,
    pub reason: &'static str,
    /// What happened, for people.
    pub note: String,
}

/// What to do with one held pod now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Release {
    /// The JSON patch for the live pod, when something changes.
    pub patch: Option<Patch>,
    /// The Event it deserves, if any.
    pub event: Option<Note>,
    /// Look again after this long (the rest of the bound), when still waiting.
    pub wait: Option<Duration>,
    /// The policy to create for the pod's `image-ref`, when ocifit takes charge of one.
    pub adopt: Option<ImageSelectionPolicy>,
}

/// Decides the release of `pod` (as the watch holds it, gated by ocifit), held for `waited`
/// so far, with `index` (none built yet: still waiting).
pub(crate) fn release(
    index: Option<&Index>,
    pod: &Pod,
    rules: HoldRules,
    waited: Duration,
) -> Release {
    let plan = match index {
        Some(index) => index.plan_pod(pod),
        None => ImagePlan::Hold {
            policy: None,
            reason: DenyReason::NotReady,
            patch: Patch(Vec::new()),
        },
    };
    match plan {
        ImagePlan::Patch {
            patch,
            event,
            decision,
            ..
        } => Release {
            patch: Some(guarded(pod, patch.0.into_iter().chain(unhold(pod)))),
            event: Some(Note {
                warning: false,
                reason: decision.as_str(),
                note: format!("released from scheduling gate {SCHEDULING_GATE}: {event}"),
            }),
            wait: None,
            adopt: None,
        },
        ImagePlan::Skip(reason) => Release {
            patch: Some(guarded(pod, unhold(pod))),
            event: Some(Note {
                warning: false,
                reason: "ReleasedUnchanged",
                note: format!("released from scheduling gate {SCHEDULING_GATE}: {reason}"),
            }),
            wait: None,
            adopt: None,
        },
        ImagePlan::Deny { reason, .. } => failed(pod, rules, &reason.to_string()),
        ImagePlan::Hold { reason, .. } => match rules.bound.checked_sub(waited) {
            Some(left) if !left.is_zero() => Release {
                patch: None,
                event: None,
                wait: Some(left),
                adopt: match &reason {
                    DenyReason::NoPolicyForImageRef { reference } if rules.take_charge => {
                        managed_policy(pod, reference)
                    }
                    _ => None,
                },
            },
            _ => failed(
                pod,
                rules,
                &format!("no decision within {}s: {reason}", rules.bound.as_secs()),
            ),
        },
    }
}

/// `pod` follows the failure rule because of `why` (also when the apiserver refused a release).
pub(crate) fn failed(pod: &Pod, rules: HoldRules, why: &str) -> Release {
    match rules.failure {
        HoldFailure::Ignore => Release {
            patch: Some(guarded(pod, unhold(pod))),
            event: Some(Note {
                warning: true,
                reason: "ReleasedUndecided",
                note: format!(
                    "no image chosen: {why}; released unchanged (hold failure rule Ignore)"
                ),
            }),
            wait: None,
            adopt: None,
        },
        HoldFailure::Fail => {
            let Some(op) = held_annotation_op(pod, why) else {
                return Release {
                    patch: None,
                    event: None,
                    wait: None,
                    adopt: None,
                };
            };
            Release {
                patch: Some(guarded(pod, [op])),
                event: Some(Note {
                    warning: true,
                    reason: "HeldUndecided",
                    note: format!(
                        "no image chosen: {why}; kept held by scheduling gate {SCHEDULING_GATE} \
                         (hold failure rule Fail): released once the cause is fixed, or delete \
                         the pod"
                    ),
                }),
                wait: None,
                adopt: None,
            }
        }
    }
}

/// Removes ocifit's gate (testing it is still where it was read), the held label and the held
/// annotation, where present.
fn unhold(pod: &Pod) -> Vec<PatchOperation> {
    let marks = [Mark::Label(HELD_LABEL), Mark::Annotation(HELD_ANNOTATION)];
    crate::cluster::unhold(pod, GATE, &marks)
}

/// The operation writing `why` as `pod`'s held annotation, or `None` when it says so already.
pub(crate) fn held_annotation_op(pod: &Pod, why: &str) -> Option<PatchOperation> {
    let annotations = pod.metadata.annotations.as_ref();
    if annotations
        .and_then(|a| a.get(HELD_ANNOTATION))
        .map(String::as_str)
        == Some(why)
    {
        return None;
    }
    Some(match annotations {
        None => add_op(
            &["metadata", "annotations"],
            json!({ HELD_ANNOTATION: why }),
        ),
        Some(_) => add_op(
            &["metadata", "annotations", HELD_ANNOTATION],
            Value::from(why),
        ),
    })
}

#[cfg(test)]
mod tests;
