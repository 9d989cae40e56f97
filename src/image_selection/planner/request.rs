//! One admission request through the planner's rules, in the order the module documentation
//! gives: skips, the policy, the placeholder containers, the candidate classes, the image, the
//! patch; what cannot be decided yet is held. Owns the order and the skip rules; each step's
//! substance lives in its own module.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::admission::Request;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::core::admission::Operation;
use sha2::{Digest, Sha256};

use super::best_image::{BestImage, decide};
use super::index::{Candidate, Grouping, Index, PlacementDigest};
use super::mutation::Decided;
use super::policy_choice::{List, choose, rewritten};
use super::read_pod::SelectionPod;
use super::release::hold;
use super::{DenyReason, ImagePlan, SkipReason};
use crate::api::pod::{
    DECISION_IMAGES, DECISION_POLICY, ENABLED_LABEL, MIRROR_ANNOTATION, MODEL_ANNOTATION,
};
use crate::classes::{ClassSelector, Placement, required_terms};

impl Index {
    /// Plans one admission request. Whether the request is a dry run does not change the plan
    /// (the admission host then queues no Event).
    pub fn plan(&self, request: &Request<SelectionPod>) -> ImagePlan {
        match (&request.operation, &request.object) {
            (Operation::Create, Some(pod)) => self.plan_pod(&pod.0),
            _ => ImagePlan::Skip(SkipReason::NotPodCreation),
        }
    }

    /// Plans the creation of `pod`, as the apiserver sent it (or, held, as it is now: the
    /// release decides with this same function). What cannot be decided yet is held.
    pub fn plan_pod(&self, pod: &Pod) -> ImagePlan {
        match self.decide_pod(pod) {
            ImagePlan::Deny { policy, reason } if reason.waits() => hold(pod, policy, reason),
            plan => plan,
        }
    }

    fn decide_pod(&self, pod: &Pod) -> ImagePlan {
        if let Some(plan) = skipped_or_unsupported(pod) {
            return plan;
        }
        let default_spec = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&default_spec);
        let choice = match choose(self, &pod.metadata, spec) {
            Ok(choice) => choice,
            Err(reason) => {
                return ImagePlan::Deny {
                    policy: None,
                    reason,
                };
            }
        };
        let policy = choice.entry.name();
        let deny = |reason| ImagePlan::Deny {
            policy: Some(Arc::clone(&choice.entry.policy)),
            reason,
        };
        let containers: Vec<((List, usize), &str)> =
            rewritten(spec, choice.entry.policy.spec.include_init_containers)
                .filter(|(_, c)| c.image.as_deref() == Some(choice.placeholder.as_str()))
                .map(|(at, c)| (at, c.name.as_str()))
                .collect();
        if containers.is_empty() {
            return ImagePlan::Skip(SkipReason::NoPlaceholder {
                policy: policy.to_owned(),
                placeholder: choice.placeholder.clone(),
            });
        }
        let found = choice
            .entry
            .grouping
            .and_then(|at| Some((at, self.groupings.get(at)?)));
        let Some((at, grouping)) = found else {
            return deny(DenyReason::PolicyNotReady {
                policy: policy.to_owned(),
                missing_class: None,
            });
        };
        let placement = match Placement::from_pod_spec(spec) {
            Ok(placement) => placement,
            Err(error) => {
                return deny(DenyReason::InvalidAffinity {
                    error: error.to_string(),
                });
            }
        };
        let candidates = match placement_key(spec) {
            Some(key) => self
                .memo
                .get_or_find((at, key), || self.candidates(grouping, &placement, spec)),
            None => self.candidates(grouping, &placement, spec).into(),
        };
        if candidates.is_empty() {
            return deny(DenyReason::NoCandidateNode {
                policy: policy.to_owned(),
                placement: placement.to_string(),
                counted: counted(&choice.entry.policy.spec.node_selector),
            });
        }
        match decide(&choice, grouping, &candidates) {
            Err(reason) => deny(reason),
            Ok(BestImage::Allow(no_fit)) => ImagePlan::Skip(SkipReason::NoMatchAllowed(no_fit)),
            Ok(BestImage::Image {
                image,
                classes,
                decision,
                excluded,
            }) => {
                let names = |at: &[usize]| -> Vec<&str> {
                    at.iter()
                        .map(|c| grouping.classes[*c].name.as_str())
                        .collect()
                };
                let decided = Decided {
                    choice: &choice,
                    containers: &containers,
                    image: &image,
                    classes: names(&classes),
                    excluded: names(&excluded),
                    decision,
                };
                let selectors: Vec<ClassSelector> =
                    classes.iter().map(|c| selector(grouping, *c)).collect();
                decided.patch(pod, spec, &selectors)
            }
        }
    }

    /// The pod's candidate classes, with how many of their nodes count for the policy and admit
    /// the pod. When its selector and required affinity read only class keys (and no node name),
    /// one node per class is asked; otherwise every node is.
    pub(super) fn candidates(
        &self,
        grouping: &Grouping,
        placement: &Placement,
        spec: &PodSpec,
    ) -> Vec<Candidate> {
        if reads_only_class_keys(spec, grouping) {
            self.candidates_by_class(grouping, placement)
        } else {
            self.candidates_by_node(grouping, placement)
        }
    }

    pub(super) fn candidates_by_node(
        &self,
        grouping: &Grouping,
        placement: &Placement,
    ) -> Vec<Candidate> {
        let mut nodes = vec![0usize; grouping.classes.len()];
        for (node, class) in &grouping.members {
            if self.nodes.get(*node).is_some_and(|n| placement.matches(n)) {
                nodes[*class] += 1;
            }
        }
        nodes
            .into_iter()
            .enumerate()
            .filter(|(_, n)| *n > 0)
            .map(|(class, nodes)| Candidate { class, nodes })
            .collect()
    }

    pub(super) fn candidates_by_class(
        &self,
        grouping: &Grouping,
        placement: &Placement,
    ) -> Vec<Candidate> {
        grouping
            .representatives
            .iter()
            .enumerate()
            .filter(|(_, node)| {
                node.and_then(|node| self.nodes.get(node))
                    .is_some_and(|n| placement.matches(n))
            })
            .map(|(class, _)| Candidate {
                class,
                nodes: grouping.classes[class].nodes.len(),
            })
            .collect()
    }
}

/// Whether the pod's nodeSelector and required node affinity read only label keys the classes
/// are drawn on, and no node name.
fn reads_only_class_keys(spec: &PodSpec, grouping: &Grouping) -> bool {
    let terms = required_terms(spec);
    let by_name = terms
        .iter()
        .any(|term| term.match_fields.as_ref().is_some_and(|f| !f.is_empty()));
    let mut keys = spec
        .node_selector
        .iter()
        .flatten()
        .map(|(key, _)| key)
        .chain(
            terms
                .iter()
                .flat_map(|term| term.match_expressions.iter().flatten())
                .map(|requirement| &requirement.key),
        );
    !by_name && keys.all(|key| grouping.is_class_key(key))
}

/// What decides a pod's candidate nodes, written canonically: its nodeSelector (a sorted map)
/// and its required node affinity.
pub(super) fn placement_key(spec: &PodSpec) -> Option<PlacementDigest> {
    let required = spec
        .affinity
        .as_ref()
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .and_then(|node| {
            node.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let mut hasher = Hashing(Sha256::new());
    serde_json::to_writer(&mut hasher, &(&spec.node_selector, required)).ok()?;
    Some(hasher.0.finalize().into())
}

/// Streams what is written into a SHA-256, so a placement is hashed without a copy of it.
struct Hashing(Sha256);

impl std::io::Write for Hashing {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The class as required node affinity can pin it: its label values, else its node names.
fn selector(grouping: &Grouping, class: usize) -> ClassSelector {
    let class = &grouping.classes[class];
    match &class.selector {
        Some(labels) => ClassSelector::Labels(labels.clone()),
        None => ClassSelector::NodeNames(class.nodes.iter().cloned().collect()),
    }
}

/// Pods left alone before any policy is looked at.
/// A pod left alone, or asking for what ocifit does not do: refused before a policy is looked
/// for, since no policy could ever decide it.
fn skipped_or_unsupported(pod: &Pod) -> Option<ImagePlan> {
    if let Some(reason) = skipped(pod) {
        return Some(ImagePlan::Skip(reason));
    }
    let model = pod.metadata.annotations.as_ref()?.get(MODEL_ANNOTATION)?;
    Some(ImagePlan::Deny {
        policy: None,
        reason: DenyReason::ModelUnsupported {
            model: model.clone(),
        },
    })
}

fn skipped(pod: &Pod) -> Option<SkipReason> {
    let meta = &pod.metadata;
    let annotation = |key: &str| meta.annotations.as_ref()?.get(key);
    let opted_in = meta
        .labels
        .as_ref()
        .and_then(|labels| labels.get(ENABLED_LABEL));
    if opted_in.map(String::as_str) != Some("true") {
        return Some(SkipReason::NotOptedIn);
    }
    if annotation(MIRROR_ANNOTATION).is_some() {
        return Some(SkipReason::MirrorPod);
    }
    let daemon_set = meta
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.kind == "DaemonSet");
    if let Some(owner) = daemon_set {
        return Some(SkipReason::DaemonSetPod {
            owner: owner.name.clone(),
        });
    }
    let node_name = pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref());
    if let Some(node) = node_name.filter(|node| !node.is_empty()) {
        return Some(SkipReason::NodeNameSet {
            node: node.to_owned(),
        });
    }
    let recorded: Option<BTreeMap<String, String>> = annotation(DECISION_IMAGES)
        .and_then(|images| serde_json::from_str(images).ok())
        .filter(|images: &BTreeMap<String, String>| !images.is_empty());
    let spec = pod.spec.as_ref()?;
    let holds = |images: &BTreeMap<String, String>| {
        images.iter().all(|(name, image)| {
            rewritten(spec, true).any(|(_, c)| &c.name == name && c.image.as_ref() == Some(image))
        })
    };
    if recorded.as_ref().is_some_and(holds) {
        let policy = annotation(DECISION_POLICY).map_or("", String::as_str);
        return Some(SkipReason::AlreadyPlanned {
            policy: policy.to_owned(),
        });
    }
    None
}

/// Which nodes a policy counts, for messages.
fn counted(selector: &BTreeMap<String, String>) -> String {
    if selector.is_empty() {
        return "every node but control-plane nodes".to_owned();
    }
    let pairs: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("nodeSelector {{{}}}", pairs.join(", "))
}
