//! Releasing a step held while its ArtifactCache was not Ready: admitted injected (its status
//! already named the endpoint and credentials it is wired to) behind the cache's scheduling gate,
//! it is released once the cache is Ready at that endpoint. A cache that cannot become Ready as
//! it is (`Conflict`, `ImageNotAllowed`), that is deleted, that now serves elsewhere, or that is
//! not Ready within the hold bound follows the hold failure rule every ocifit hold shares:
//! `Ignore` releases the step (its helpers then fail to reach the cache, and so does the step),
//! `Fail` keeps it held with the reason in the held annotation (released if the cache becomes
//! Ready later). Each outcome is an Event on the pod. Pure: time passed in.

use std::time::Duration;

use json_patch::Patch;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::planner::{CacheState, wiring_of};
use crate::admission::add_op;
use crate::api::step;
use crate::cluster::{Gate, HoldFailure, Mark, held_at};
use crate::cluster::{Kept, Keys, Spec, guarded};

/// The cache's scheduling gate, on every step it holds (each carries the held label).
pub const GATE: Gate = Gate {
    name: step::CACHE_GATE,
    label: step::HELD_LABEL,
};

/// How long a step may be held, and what follows: the hold bound and rule of every ocifit hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldRules {
    /// From the pod's creation.
    pub bound: Duration,
    pub failure: HoldFailure,
}

/// An Event on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// What to do with one held step now.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Release {
    /// The JSON patch for the live pod, when something changes.
    pub patch: Option<Patch>,
    pub event: Option<Note>,
    /// Look again after this long (the rest of the bound), when still waiting.
    pub wait: Option<Duration>,
}

/// The cache a held step was wired to (name and endpoint), from its marker annotation.
pub(super) fn wired_to(pod: &Pod) -> Option<(&str, &str)> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(step::INJECTED)
        .and_then(|marker| wiring_of(marker))
}

/// What the held-step watch keeps of a pod besides its identity: ocifit's labels and
/// annotations and the scheduling gates.
pub(super) const KEPT: Kept = Kept {
    labels: Keys::Prefixed(&["artifacts.ocifit.io/"]),
    annotations: Keys::Prefixed(&["artifacts.ocifit.io/"]),
    spec: Spec::Gates,
};

/// Decides the release of `pod` (held by [`GATE`]) whose cache is now `cache`, held for `waited`.
pub(super) fn release(
    pod: &Pod,
    cache: &CacheState,
    rules: HoldRules,
    waited: Duration,
) -> Release {
    if held_at(pod, GATE).is_none() {
        return Release::default();
    }
    let Some((name, wired)) = wired_to(pod) else {
        return failed(
            pod,
            rules,
            "the step names no ArtifactCache it was wired to".to_owned(),
        );
    };
    match cache {
        CacheState::Ready { endpoint, .. } if endpoint == wired => Release {
            patch: Some(unhold(pod)),
            event: Some(Note {
                warning: false,
                reason: "CacheReady",
                note: format!(
                    "released from scheduling gate {}: ArtifactCache {name} is Ready at {endpoint}",
                    GATE.name
                ),
            }),
            wait: None,
        },
        CacheState::Ready { endpoint, .. } => failed(
            pod,
            rules,
            format!(
                "ArtifactCache {name} is Ready at {endpoint}, not at {wired} where the step was wired while the cache started; create the step again"
            ),
        ),
        CacheState::NotReady {
            reason,
            stuck: true,
        } => failed(
            pod,
            rules,
            format!("ArtifactCache {name} cannot become Ready: {reason}"),
        ),
        CacheState::Missing => failed(pod, rules, format!("ArtifactCache {name} no longer exists")),
        CacheState::Starting { reason, .. } | CacheState::NotReady { reason, .. } => {
            match rules.bound.checked_sub(waited) {
                Some(left) if !left.is_zero() => Release {
                    wait: Some(left),
                    ..Release::default()
                },
                _ => failed(
                    pod,
                    rules,
                    format!(
                        "ArtifactCache {name} is not Ready within {}s: {reason}",
                        rules.bound.as_secs()
                    ),
                ),
            }
        }
    }
}

/// `pod` follows the hold failure rule because of `why`.
pub(super) fn failed(pod: &Pod, rules: HoldRules, why: String) -> Release {
    match rules.failure {
        HoldFailure::Ignore => Release {
            patch: Some(unhold(pod)),
            event: Some(Note {
                warning: true,
                reason: "ReleasedCacheNotReady",
                note: format!(
                    "{why}; released from scheduling gate {} (hold failure rule Ignore): the step's helpers cannot reach the cache, so the step fails",
                    GATE.name
                ),
            }),
            wait: None,
        },
        HoldFailure::Fail => {
            let annotations = pod.metadata.annotations.as_ref();
            if annotations.and_then(|a| a.get(step::HELD_ANNOTATION)) == Some(&why) {
                return Release::default();
            }
            let op = match annotations {
                None => add_op(
                    &["metadata", "annotations"],
                    json!({ step::HELD_ANNOTATION: why }),
                ),
                Some(_) => add_op(
                    &["metadata", "annotations", step::HELD_ANNOTATION],
                    Value::from(why.as_str()),
                ),
            };
            Release {
                patch: Some(guarded(pod, [op])),
                event: Some(Note {
                    warning: true,
                    reason: "HeldCacheNotReady",
                    note: format!(
                        "{why}; kept held by scheduling gate {} (hold failure rule Fail): released once the cache is Ready, or delete the pod",
                        GATE.name
                    ),
                }),
                wait: None,
            }
        }
    }
}

/// Removes the gate (testing it is still where it was read), the held label and annotation, if
/// the pod is still as read.
fn unhold(pod: &Pod) -> Patch {
    let marks = [
        Mark::Label(step::HELD_LABEL),
        Mark::Annotation(step::HELD_ANNOTATION),
    ];
    guarded(pod, crate::cluster::unhold(pod, GATE, &marks))
}

#[cfg(test)]
mod tests;
