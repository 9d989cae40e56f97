//! The pod planner: from an admission request, the policies (spec and status) and the node
//! inventory, decides the JSON patch that gives a pod its images (pinning it to the best image's
//! classes when its candidate nodes disagree), or why it is denied, left alone or held. Pure: it
//! never fetches or evaluates artifacts (the policy's status holds the answer per node class) nor
//! emits Events (its answer says what the Event would). Its rules, in order, are
//! docs/pod-contract.md's. What it cannot decide *yet* is held ([`ImagePlan::Hold`], [`hold`]) and
//! released with this planner's later decision ([`release`]). Work that does not depend on the pod
//! is done once per store change in an [`Index`]; [`Index::plan`] plans each request.

mod best_image;
mod index;
mod managed;
mod mutation;
mod patch;
mod policy_choice;
mod read_pod;
mod reasons;
mod release;
mod request;
pub use managed::Quota;
pub use managed::managed_name;
pub(super) use managed::room;
pub(super) use managed::{Room, counted_against, foreign, is_managed};
pub use read_pod::SelectionPod;
pub use release::GATE;
pub use release::{HoldFailure, HoldRules};
pub(super) use release::{Release, failed, release};
pub(super) use release::{gate_at, held_annotation_op, hold};

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::admission::{Response, Verdict};
use crate::api::ImageSelectionPolicy;

pub use index::Index;
pub(super) use reasons::{ClassRow, DenyReason, NoFit, SkipReason};

/// What to do with one admission request.
#[derive(Debug, Clone, PartialEq)]
pub enum ImagePlan {
    /// Admit the pod with this patch.
    Patch {
        /// The policy that chose the image.
        policy: Arc<ImageSelectionPolicy>,
        /// The JSON patch against the pod as the apiserver sent it.
        patch: json_patch::Patch,
        /// The decision annotations the pod carries once patched (`patch` writes those it lacks).
        annotations: BTreeMap<String, String>,
        /// Warnings for the response (e.g. the pod was pinned to some of its nodes).
        warnings: Vec<String>,
        /// How the image was chosen.
        decision: Decision,
        /// The note of the Event recording the decision.
        event: String,
    },
    /// Refuse the pod.
    Deny {
        /// The policy the pod was planned under, when one was chosen.
        policy: Option<Arc<ImageSelectionPolicy>>,
        /// Why; its `Display` is the message the user sees.
        reason: DenyReason,
    },
    /// Admit the pod unchanged; the reason's `Display` is the response's warning.
    Skip(SkipReason),
    /// Admit the pod held by ocifit's scheduling gate: it cannot be decided yet.
    Hold {
        /// The policy the pod was planned under, when one was chosen.
        policy: Option<Arc<ImageSelectionPolicy>>,
        /// What is missing; one that `DenyReason::waits`.
        reason: DenyReason,
        /// The JSON patch adding the gate and the held label (empty when the pod has both).
        patch: json_patch::Patch,
    },
}

impl ImagePlan {
    /// The outcome, a metric label: `patched`, `pinned`, `denied`, `skipped` or `held`.
    pub fn outcome(&self) -> &'static str {
        match self {
            ImagePlan::Patch {
                decision: Decision::Pinned,
                ..
            } => "pinned",
            ImagePlan::Patch { .. } => "patched",
            ImagePlan::Deny { .. } => "denied",
            ImagePlan::Skip(_) => "skipped",
            ImagePlan::Hold { .. } => "held",
        }
    }

    /// The reason, a metric label and the Event reason: the decision, deny or skip reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ImagePlan::Patch { decision, .. } => decision.as_str(),
            ImagePlan::Deny { reason, .. } | ImagePlan::Hold { reason, .. } => reason.as_str(),
            ImagePlan::Skip(reason) => reason.as_str(),
        }
    }

    /// The warnings to send with the response.
    pub fn warnings(&self) -> Vec<String> {
        match self {
            ImagePlan::Patch { warnings, .. } => warnings.clone(),
            ImagePlan::Deny { .. } => Vec::new(),
            ImagePlan::Skip(reason) => vec![reason.to_string()],
            ImagePlan::Hold { reason, .. } => vec![release::warning(reason)],
        }
    }
}

impl Verdict for ImagePlan {
    fn outcome(&self) -> &'static str {
        ImagePlan::outcome(self)
    }

    fn reason(&self) -> &'static str {
        ImagePlan::reason(self)
    }

    fn response(&self) -> Response<'_> {
        match self {
            ImagePlan::Patch {
                patch, warnings, ..
            } => Response::Allow {
                patch: Some(patch.into()),
                warnings: warnings.clone(),
            },
            ImagePlan::Deny { reason, .. } => Response::Deny(reason.to_string()),
            ImagePlan::Skip(reason) => Response::Allow {
                patch: None,
                warnings: vec![reason.to_string()],
            },
            ImagePlan::Hold { patch, reason, .. } => Response::Allow {
                patch: Some(patch)
                    .filter(|patch| !patch.0.is_empty())
                    .map(Into::into),
                warnings: vec![release::warning(reason)],
            },
        }
    }
}

/// How a patched pod's image was chosen; also the reason of its Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Every candidate node resolves to the same image.
    Selected,
    /// The candidate nodes disagreed; the pod was pinned to the classes of the best image.
    Pinned,
    /// No candidate node has a compatible image; the policy's `fallbackImage` was used.
    Fallback,
}

impl Decision {
    /// The name, for metric labels and as the Event reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Selected => "ImageSelected",
            Decision::Pinned => "ImagePinned",
            Decision::Fallback => "FallbackImage",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
