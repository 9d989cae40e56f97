//! The pod planner: given an admission request for a pod, the policies (spec and status) and the
//! node inventory, decides the JSON patch that gives the pod its images (and, when its candidate
//! nodes disagree, pins it to the classes of the best image), or why it is denied or left alone.
//! Pure: no I/O, no async, no clock, no client. It must not fetch artifacts, evaluate them (the
//! controller's status already holds the answer per node class) or emit Events (it says what the
//! Event would say; the HTTP side emits it unless the request is a dry run).
//!
//! The work that does not depend on the pod (which nodes count for each policy and which class
//! each belongs to) is done once in an [`Index`], which the HTTP side rebuilds when the policy or
//! node stores change; [`Index::plan`] then walks the policy's nodes once per pod.
//!
//! The rules, in order:
//! 1. Left alone ([`ImagePlan::Skip`]): requests that do not create a pod, pods without the opt-in
//!    label (`oci.image.compatibilities.selection/enabled: "true"`), mirror pods, pods owned
//!    by a DaemonSet, pods with `spec.nodeName`, and pods whose decision annotations describe
//!    their containers as they are (the webhook's reinvocation over its own output).
//! 2. The policy: label, else annotation, `oci.image.compatibilities.selection/policy`; else the
//!    `…/image-ref` annotation matched against `spec.artifact.ref` (several such policies: the
//!    ones whose placeholder a container uses); else the policy whose `targetImage` a container
//!    (or, where the policy says so, an init container) uses. The `…/target-image` annotation
//!    overrides the placeholder of a policy chosen by name or image-ref.
//! 3. Candidate nodes: the nodes that count for the policy (its `nodeSelector`) on which the
//!    pod's nodeSelector and required node affinity allow it. Each belongs to a node class, drawn
//!    with `status.classKeys` exactly as the controller draws it, so names agree with status.
//! 4. The image: one image over every candidate class is patched in. When the classes disagree
//!    (different images, or some with no compatible image), `onUnpinned: Pin` pins the pod to the
//!    classes of the best image and `Deny` refuses it. The best image is the one whose classes
//!    hold the most candidate nodes; ties go to the image with the class of the highest match
//!    weight, then to the image of the class whose name sorts first. When no candidate class has
//!    a compatible image, `fallbackImage` is used, else `onNoMatch` applies.
//!
//! What ocifit cannot decide *yet* is never guessed for and never refused: a policy without
//! status, a candidate class missing from status (a new kind of node not yet reconciled), a
//! policy (named, or by image-ref) not in this replica's store yet, or no index built yet. The
//! pod is admitted held ([`ImagePlan::Hold`]: ocifit's scheduling gate and held label, see [`hold`]),
//! and the controller releases it with the decision this same planner gives then ([`release`]).
//!
//! For the admission side: build an [`Index`] from the policy store and the node store (each
//! node's labels and, when NFD publishes them, its merged NodeFeature features: the same inputs
//! the controller groups, or class names will not match status), share it behind an `Arc` and
//! swap in a new one when a store changes. Per request, [`Index::plan`]. An [`ImagePlan`] is the
//! answer in this feature's vocabulary: its outcome and reason name the metric labels and the
//! Event reason, a denial's or skip's message is its reason's `Display`, and it carries the
//! policy it was planned under, so Events never choose again.

mod best_image;
mod hold;
mod index;
mod managed;
mod mutation;
mod nodes;
mod patch;
mod policy_choice;
mod read_pod;
mod reasons;
mod release;
mod request;
pub use hold::{GATE, gate_at, hold};
pub use managed::{Quota, Room, counted_against, foreign, is_managed, managed_name, room};
pub use read_pod::SelectionPod;
pub use release::{HoldFailure, HoldRules, Release, failed, release};

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::admission::{Response, Verdict};
use crate::api::ImageSelectionPolicy;

pub use index::Index;
pub use reasons::{ClassRow, DenyReason, NoFit, SkipReason};

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
        /// What is missing; one that [`DenyReason::waits`].
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
            ImagePlan::Hold { reason, .. } => vec![hold::warning(reason)],
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
                warnings: vec![hold::warning(reason)],
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
