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
//! 1. Left alone ([`Plan::Skip`]): requests that do not create a pod, pods without the opt-in
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
//! A policy without status, or a candidate class missing from status (a new kind of node not yet
//! reconciled), is "not ready": the pod is denied with a message saying so, never guessed for.
//!
//! For the HTTP side: build an [`Index`] from the policy store and the node store (each node's
//! labels and, when NFD publishes them, its merged NodeFeature features: the same inputs the
//! controller groups, or class names will not match status), share it behind an `Arc` and swap
//! in a new one when a store changes. Per request, [`Index::plan`]; then `Plan::Patch` →
//! `AdmissionResponse::with_patch` plus the warnings and, unless `dryRun`, an Event with
//! [`Decision::as_str`] as reason; `Plan::Deny` → `deny(message)`; `Plan::Skip` → allowed with
//! the message as a warning. [`Plan::outcome`] and [`Plan::reason`] are the metric labels.

mod choose;
mod decide;
mod flow;
mod index;
mod nodes;
mod patch;
mod written;

use std::collections::BTreeMap;

pub use index::Index;

/// What to do with one admission request.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Admit the pod with this patch.
    Patch {
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
        /// Why, for metrics and tests.
        reason: DenyReason,
        /// The message the user sees.
        message: String,
    },
    /// Admit the pod unchanged.
    Skip {
        /// Why, for metrics and tests.
        reason: SkipReason,
        /// The warning for the response.
        message: String,
    },
}

impl Plan {
    /// The outcome as a metric label: `patch`, `deny` or `skip`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Plan::Patch { .. } => "patch",
            Plan::Deny { .. } => "deny",
            Plan::Skip { .. } => "skip",
        }
    }

    /// The reason as a metric label: the decision, deny reason or skip reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Plan::Patch { decision, .. } => decision.as_str(),
            Plan::Deny { reason, .. } => reason.as_str(),
            Plan::Skip { reason, .. } => reason.as_str(),
        }
    }

    /// The warnings to send with the response.
    pub fn warnings(&self) -> Vec<String> {
        match self {
            Plan::Patch { warnings, .. } => warnings.clone(),
            Plan::Deny { .. } => Vec::new(),
            Plan::Skip { message, .. } => vec![message.clone()],
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

/// Why a pod is denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyReason {
    /// The pod names (label or annotation) a policy that does not exist.
    PolicyNotFound,
    /// The pod's image-ref annotation names an artifact no policy uses.
    NoPolicyForImageRef,
    /// Several policies fit the pod and it names none of them.
    AmbiguousPolicy,
    /// The pod opted in but no policy applies to it.
    NoPolicy,
    /// The policy has no resolved status yet, or a candidate node class is not in it.
    PolicyNotReady,
    /// The pod's required node affinity is malformed.
    InvalidAffinity,
    /// No node both counts for the policy and matches the pod's selector and affinity.
    NoCandidateNode,
    /// The candidate nodes need different images and the policy says `onUnpinned: Deny`.
    Unpinned,
    /// No candidate node has a compatible image, no fallback, and `onNoMatch: Deny`.
    NoMatch,
    /// The planner could not write the patch it decided on (pinning or encoding failed). Not
    /// reachable with a valid index and pod; a bug if seen, and the message says what failed.
    Internal,
}

impl DenyReason {
    /// The name, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            DenyReason::PolicyNotFound => "PolicyNotFound",
            DenyReason::NoPolicyForImageRef => "NoPolicyForImageRef",
            DenyReason::AmbiguousPolicy => "AmbiguousPolicy",
            DenyReason::NoPolicy => "NoPolicy",
            DenyReason::PolicyNotReady => "PolicyNotReady",
            DenyReason::InvalidAffinity => "InvalidAffinity",
            DenyReason::NoCandidateNode => "NoCandidateNode",
            DenyReason::Unpinned => "Unpinned",
            DenyReason::NoMatch => "NoMatch",
            DenyReason::Internal => "Internal",
        }
    }

    /// Whether the same request may succeed later without the user changing anything (the
    /// controller has not caught up yet).
    pub fn is_retryable(self) -> bool {
        matches!(self, DenyReason::PolicyNotReady)
    }
}

/// Why a pod is admitted unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The request does not create a pod (another operation, or no object).
    NotPodCreation,
    /// The pod lacks the opt-in label (`…/enabled: "true"`); the webhook's objectSelector
    /// should not have sent it.
    NotOptedIn,
    /// A mirror pod (annotation `kubernetes.io/config.mirror`): the kubelet runs it as written.
    MirrorPod,
    /// A pod owned by a DaemonSet: it runs on every node, whatever its image.
    DaemonSetPod,
    /// A pod with `spec.nodeName`: already bound, its node is not a choice.
    NodeNameSet,
    /// The pod's decision annotations already describe its containers (reinvocation).
    AlreadyPlanned,
    /// No container uses the policy's placeholder.
    NoPlaceholder,
    /// No candidate node has a compatible image and the policy says `onNoMatch: Allow`.
    NoMatchAllowed,
}

impl SkipReason {
    /// The name, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NotPodCreation => "NotPodCreation",
            SkipReason::NotOptedIn => "NotOptedIn",
            SkipReason::MirrorPod => "MirrorPod",
            SkipReason::DaemonSetPod => "DaemonSetPod",
            SkipReason::NodeNameSet => "NodeNameSet",
            SkipReason::AlreadyPlanned => "AlreadyPlanned",
            SkipReason::NoPlaceholder => "NoPlaceholder",
            SkipReason::NoMatchAllowed => "NoMatchAllowed",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
