//! The planner's vocabulary for pods it denies or leaves alone: each reason carries its data,
//! its name is the metric label and Event reason, and its message is its `Display`. Decides
//! nothing; the rules that pick a reason live in `request`, `policy_choice` and `best_image`.
//! Each `DenyReason` has its row in `docs/pod-contract.md` (a component test holds them equal).

use std::fmt;

use crate::api::pod::{ENABLED_LABEL, IMAGE_REF_ANNOTATION, MODEL_ANNOTATION, POLICY};

/// Why a pod is denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenyReason {
    /// No index has been built yet (the stores have not synced).
    NotReady,
    /// The pod names (label or annotation) a policy that does not exist.
    PolicyNotFound {
        name: String,
        /// `label` or `annotation`.
        named_by: &'static str,
    },
    /// The pod's image-ref annotation names an artifact no policy uses.
    NoPolicyForImageRef { reference: String },
    /// Several policies fit the pod and it names none of them.
    AmbiguousPolicy {
        policies: Vec<String>,
        /// By what they all apply (`artifact "…"`, `their targetImage`).
        by: String,
    },
    /// The pod opted in but no policy applies to it.
    NoPolicy,
    /// The pod asks for ocifit-k8s's model-based selection (its `…/model` annotation), which
    /// ocifit does not do: refused at once rather than held until it ends undecided.
    ModelUnsupported { model: String },
    /// The policy has no resolved status yet, or a candidate node class is not in it.
    PolicyNotReady {
        policy: String,
        /// The class missing from its status and its nodes (shown), when it is resolved.
        missing_class: Option<(String, String)>,
    },
    /// The pod's required node affinity is malformed.
    InvalidAffinity { error: String },
    /// No node both counts for the policy and matches the pod's selector and affinity.
    NoCandidateNode {
        policy: String,
        /// The pod's placement, for people.
        placement: String,
        /// Which nodes the policy counts, for people.
        counted: String,
    },
    /// The candidate nodes need different images and the policy says `onUnpinned: Deny`.
    Unpinned {
        policy: String,
        /// Each candidate class, its image (none: no compatible one) and its candidate nodes.
        classes: Vec<ClassRow>,
    },
    /// No candidate node has a compatible image, no fallback, and `onNoMatch: Deny`.
    NoMatch(NoFit),
    /// The planner could not write the patch it decided on (pinning or encoding failed). Not
    /// reachable with a valid index and pod; a bug if seen.
    Internal {
        /// What failed.
        what: String,
    },
}

/// A candidate class as an `Unpinned` denial lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassRow {
    /// The class's name.
    pub class: String,
    /// Its image, if it has one.
    pub image: Option<String>,
    /// How many of the pod's candidate nodes it holds.
    pub nodes: usize,
}

/// No candidate class of the pod has a compatible image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoFit {
    pub policy: String,
    /// Each candidate class and why it has no image (from its status row).
    pub classes: Vec<(String, String)>,
}

impl DenyReason {
    /// The name, for metric labels and as the Event reason.
    pub fn as_str(&self) -> &'static str {
        match self {
            DenyReason::NotReady => "NotReady",
            DenyReason::PolicyNotFound { .. } => "PolicyNotFound",
            DenyReason::NoPolicyForImageRef { .. } => "NoPolicyForImageRef",
            DenyReason::AmbiguousPolicy { .. } => "AmbiguousPolicy",
            DenyReason::NoPolicy => "NoPolicy",
            DenyReason::ModelUnsupported { .. } => "ModelUnsupported",
            DenyReason::PolicyNotReady { .. } => "PolicyNotReady",
            DenyReason::InvalidAffinity { .. } => "InvalidAffinity",
            DenyReason::NoCandidateNode { .. } => "NoCandidateNode",
            DenyReason::Unpinned { .. } => "Unpinned",
            DenyReason::NoMatch(_) => "NoMatch",
            DenyReason::Internal { .. } => "Internal",
        }
    }

    /// Whether this is ocifit catching up rather than a decision: the pod is held until the
    /// decision exists, never refused for it.
    pub fn waits(&self) -> bool {
        matches!(
            self,
            DenyReason::NotReady
                | DenyReason::PolicyNotFound { .. }
                | DenyReason::NoPolicyForImageRef { .. }
                | DenyReason::PolicyNotReady { .. }
        )
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::NotReady => f.write_str("ocifit has not read the policies and nodes yet"),
            DenyReason::PolicyNotFound { name, named_by } => write!(
                f,
                "ImageSelectionPolicy {name:?} (named by {named_by} {POLICY}) does not exist: \
                 create it, or name an existing policy"
            ),
            DenyReason::NoPolicyForImageRef { reference } => write!(
                f,
                "no ImageSelectionPolicy uses artifact {reference:?} (annotation \
                 {IMAGE_REF_ANNOTATION}): create one with spec.artifact.ref: {reference} \
                 (ocifit never fetches artifacts at admission)"
            ),
            DenyReason::AmbiguousPolicy { policies, by } => write!(
                f,
                "ImageSelectionPolicies {} all apply to the pod by {by}: name one with label \
                 {POLICY}",
                policies.join(", ")
            ),
            DenyReason::NoPolicy => write!(
                f,
                "the pod opted in to ocifit but names no ImageSelectionPolicy and no container \
                 image is a policy's targetImage: set label {POLICY}"
            ),
            DenyReason::ModelUnsupported { model } => write!(
                f,
                "annotation {MODEL_ANNOTATION}: {model:?} asks for ocifit-k8s's model-based \
                 selection, which ocifit does not support: remove the annotation and select the \
                 image with an ImageSelectionPolicy whose spec.artifact.ref is a compatibility \
                 artifact (docs/migrating.md#from-ocifit-k8s)"
            ),
            DenyReason::PolicyNotReady {
                policy,
                missing_class: None,
            } => write!(
                f,
                "ImageSelectionPolicy {policy} is not ready: its artifact has not been resolved \
                 yet (kubectl describe isp {policy})"
            ),
            DenyReason::PolicyNotReady {
                policy,
                missing_class: Some((class, nodes)),
            } => write!(
                f,
                "ImageSelectionPolicy {policy} is not ready: node class {class} ({nodes}) is not \
                 in its status yet (the controller has not reconciled it)"
            ),
            DenyReason::InvalidAffinity { error } => f.write_str(error),
            DenyReason::NoCandidateNode {
                policy,
                placement,
                counted,
            } => write!(
                f,
                "no node matches the pod's {placement} among the nodes ImageSelectionPolicy \
                 {policy} counts ({counted})"
            ),
            DenyReason::Unpinned { policy, classes } => {
                write!(
                    f,
                    "the pod's candidate nodes need different images under ImageSelectionPolicy \
                     {policy} (onUnpinned: Deny): "
                )?;
                for (at, row) in classes.iter().enumerate() {
                    let separator = if at == 0 { "" } else { ", " };
                    let nodes = if row.nodes == 1 {
                        "1 node".to_owned()
                    } else {
                        format!("{} nodes", row.nodes)
                    };
                    write!(
                        f,
                        "{separator}{} → {} ({nodes})",
                        row.class,
                        row.image.as_deref().unwrap_or("no compatible image")
                    )?;
                }
                f.write_str("; narrow its nodeSelector or node affinity to one of these classes")
            }
            DenyReason::NoMatch(no_fit) => no_fit.fmt(f),
            DenyReason::Internal { what } => f.write_str(what),
        }
    }
}

impl fmt::Display for NoFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no candidate image of ImageSelectionPolicy {} fits the pod's nodes:",
            self.policy
        )?;
        for (at, (class, reason)) in self.classes.iter().enumerate() {
            let separator = if at == 0 { " " } else { "; " };
            write!(f, "{separator}class {class}: {reason}")?;
        }
        Ok(())
    }
}

/// Why a pod is admitted unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The request does not create a pod (another operation, or no object).
    NotPodCreation,
    /// The pod lacks the opt-in label (`…/enabled: "true"`); the webhook's objectSelector
    /// should not have sent it.
    NotOptedIn,
    /// A mirror pod (annotation `kubernetes.io/config.mirror`): the kubelet runs it as written.
    MirrorPod,
    /// A pod owned by a DaemonSet: it runs on every node, whatever its image.
    DaemonSetPod {
        /// The DaemonSet.
        owner: String,
    },
    /// A pod with `spec.nodeName`: already bound, its node is not a choice.
    NodeNameSet { node: String },
    /// The pod's decision annotations already describe its containers (reinvocation).
    AlreadyPlanned {
        /// The policy its annotations name.
        policy: String,
    },
    /// No container uses the policy's placeholder.
    NoPlaceholder {
        policy: String,
        /// Its placeholder (or the pod's override).
        placeholder: String,
    },
    /// No candidate node has a compatible image and the policy says `onNoMatch: Allow`.
    NoMatchAllowed(NoFit),
}

impl SkipReason {
    /// The name, for metric labels.
    pub fn as_str(&self) -> &'static str {
        match self {
            SkipReason::NotPodCreation => "NotPodCreation",
            SkipReason::NotOptedIn => "NotOptedIn",
            SkipReason::MirrorPod => "MirrorPod",
            SkipReason::DaemonSetPod { .. } => "DaemonSetPod",
            SkipReason::NodeNameSet { .. } => "NodeNameSet",
            SkipReason::AlreadyPlanned { .. } => "AlreadyPlanned",
            SkipReason::NoPlaceholder { .. } => "NoPlaceholder",
            SkipReason::NoMatchAllowed(_) => "NoMatchAllowed",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NotPodCreation => {
                f.write_str("ocifit only chooses images when a pod is created")
            }
            SkipReason::NotOptedIn => write!(
                f,
                "pod lacks label {ENABLED_LABEL}=\"true\": ocifit leaves it unchanged"
            ),
            SkipReason::MirrorPod => f.write_str(
                "mirror pod: the kubelet runs it as written, ocifit leaves it unchanged",
            ),
            SkipReason::DaemonSetPod { owner } => write!(
                f,
                "pod of DaemonSet {owner}: it runs on every node, ocifit leaves it unchanged"
            ),
            SkipReason::NodeNameSet { node } => write!(
                f,
                "pod already bound to node {node} (spec.nodeName): ocifit leaves it unchanged"
            ),
            SkipReason::AlreadyPlanned { policy } => write!(
                f,
                "images already chosen by ImageSelectionPolicy {policy}: pod left unchanged"
            ),
            SkipReason::NoPlaceholder {
                policy,
                placeholder,
            } => write!(
                f,
                "no container uses image {placeholder} (placeholder of ImageSelectionPolicy \
                 {policy}): pod left unchanged"
            ),
            SkipReason::NoMatchAllowed(no_fit) => {
                write!(f, "{no_fit}; admitted unchanged (onNoMatch: Allow)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unpinned_denial_lists_each_class_with_its_image_and_nodes() {
        let reason = DenyReason::Unpinned {
            policy: "app".into(),
            classes: vec![
                ClassRow {
                    class: "c-1".into(),
                    image: Some("debian:11".into()),
                    nodes: 2,
                },
                ClassRow {
                    class: "c-2".into(),
                    image: None,
                    nodes: 1,
                },
            ],
        };
        assert_eq!(
            reason.to_string(),
            "the pod's candidate nodes need different images under ImageSelectionPolicy app \
             (onUnpinned: Deny): c-1 → debian:11 (2 nodes), c-2 → no compatible image (1 node); \
             narrow its nodeSelector or node affinity to one of these classes"
        );
        assert_eq!(reason.as_str(), "Unpinned");
    }

    #[test]
    fn no_fit_names_each_class_and_allowing_it_says_so() {
        let no_fit = NoFit {
            policy: "app".into(),
            classes: vec![("c-1".into(), "x".into()), ("c-2".into(), "y".into())],
        };
        assert_eq!(
            DenyReason::NoMatch(no_fit.clone()).to_string(),
            "no candidate image of ImageSelectionPolicy app fits the pod's nodes: class c-1: x; \
             class c-2: y"
        );
        assert!(
            SkipReason::NoMatchAllowed(no_fit)
                .to_string()
                .ends_with("; admitted unchanged (onNoMatch: Allow)")
        );
    }
}
