//! The running-pod audit's decisions, shared by `ocifit placement audit` and the controller's
//! audit: which running pods a policy selects (as the gate would select them, their node set
//! aside: [`select`]), and whether the node each runs on is among the platforms every container's
//! image offers, by the planner's own rule ([`intersect`], [`Common::allows`]), or why that is
//! unknown ([`judge`]). With `misplaced: Evict`, which of the misplaced pods may be evicted in one
//! pass ([`to_evict`]). Pure: pods, nodes, policies and inspections are passed in.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::Serialize;

use super::platforms::{ContainerImage, intersect};
use super::pod_view::PodView;
use super::policy::Policy;
use super::release::Inspection;
use super::select::{Namespace, Selection, select};
use crate::platform::NodePlatform;
use crate::registry::{Reference, parse_reference};

/// Pods evicted in one pass at most, cluster-wide.
pub(super) const EVICTIONS_PER_PASS: usize = 10;

/// The owners whose controllers recreate a pod that is evicted (`apiVersion` group, kind).
const RECREATING_OWNERS: [(&str, &str); 4] = [
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("batch", "Job"),
    ("", "ReplicationController"),
];

/// The policy that selects `pod`, if it is running on a node (not being deleted) and a policy
/// selects it: the gate's selection, the pod's node set aside (every running pod is bound).
pub(crate) fn audited<'p>(
    pod: &Pod,
    namespace: Namespace<'_>,
    own_namespace: &str,
    policies: &'p [Policy],
) -> Option<&'p Policy> {
    let running = pod.metadata.deletion_timestamp.is_none()
        && node(pod).is_some()
        && pod
            .status
            .as_ref()
            .and_then(|status| status.phase.as_deref())
            == Some("Running");
    if !running {
        return None;
    }
    let view = PodView {
        node_name: None,
        ..PodView::from(pod)
    };
    match select(view, namespace, own_namespace, policies) {
        Selection::Selected(policy) => Some(policy),
        Selection::Excluded(_) | Selection::Unselected => None,
    }
}

/// The node `pod` is bound to.
pub(crate) fn node(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .filter(|name| !name.is_empty())
}

/// `pod` with each container's image named by the digest its node ran (`imageID`), when the
/// runtime reports a registry digest: a tag moved since the pod started is judged by what runs,
/// not by what the tag names now. Containers without one keep their image.
pub(crate) fn as_run(pod: &Pod) -> Pod {
    let mut ran = pod.clone();
    let statuses: Vec<(String, String)> = pod
        .status
        .iter()
        .flat_map(|status| {
            let init = status.init_container_statuses.iter().flatten();
            init.chain(status.container_statuses.iter().flatten())
        })
        .filter_map(|status| {
            let (_, digest) = status.image_id.rsplit_once('@')?;
            digest
                .starts_with("sha256:")
                .then(|| (status.name.clone(), digest.to_owned()))
        })
        .collect();
    let Some(spec) = ran.spec.as_mut() else {
        return ran;
    };
    let containers = spec.init_containers.iter_mut().flatten();
    for container in containers.chain(spec.containers.iter_mut()) {
        let digest = statuses
            .iter()
            .find(|(name, _)| *name == container.name)
            .map(|(_, digest)| digest.clone());
        let reference = container.image.as_deref().map(parse_reference);
        if let (Some(digest), Some(Ok(reference))) = (digest, reference) {
            let at = Reference::with_digest(
                reference.registry().to_owned(),
                reference.repository().to_owned(),
                digest,
            );
            container.image = Some(at.whole());
        }
    }
    ran
}

/// Why a running pod is on the wrong platform, or may be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misplacement {
    /// The node's platform is not among those every container's image offers.
    #[error("node {node} is {platform}; its containers' images ({images}) run on {offered}")]
    WrongPlatform {
        node: String,
        platform: String,
        /// `container: image` of each, so the report names what to fix.
        images: String,
        offered: String,
    },
    /// The containers' images share no platform: no node runs them all.
    #[error("node {node} is {platform}; {disagreement}")]
    NoCommonPlatform {
        node: String,
        platform: String,
        disagreement: String,
    },
    /// An image's platforms could not be read.
    #[error("the platforms of container {container}'s image are unknown: {why}")]
    Unknown { container: String, why: String },
}

impl Misplacement {
    /// The reason's name, for output and Events.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::WrongPlatform { .. } => "WrongPlatform",
            Self::NoCommonPlatform { .. } => "NoCommonPlatform",
            Self::Unknown { .. } => "PlatformsUnknown",
        }
    }

    /// Whether evicting the pod can help: its images are known not to run on its node. A pod
    /// whose images' platforms are unknown would be placed no better the next time.
    pub fn evictable(&self) -> bool {
        !matches!(self, Self::Unknown { .. })
    }
}

/// Whether a pod on `node` (of `platform`) whose containers' images gave `inspections` is
/// misplaced, and why: an image not inspected first, then the planner's intersection.
pub(crate) fn judge(
    node: &str,
    platform: &NodePlatform,
    inspections: &[Inspection],
) -> Option<Misplacement> {
    let mut images = Vec::with_capacity(inspections.len());
    for inspection in inspections {
        match &inspection.result {
            Ok(inspected) => images.push(ContainerImage {
                name: &inspection.container,
                platforms: &inspected.platforms,
            }),
            Err(failure) => {
                return Some(Misplacement::Unknown {
                    container: inspection.container.clone(),
                    why: failure.to_string(),
                });
            }
        }
    }
    match intersect(&images) {
        Ok(common) if common.allows(platform) => None,
        Ok(common) => Some(Misplacement::WrongPlatform {
            node: node.to_owned(),
            platform: platform.to_string(),
            images: inspections
                .iter()
                .map(|inspection| format!("{}: {}", inspection.container, inspection.image))
                .collect::<Vec<_>>()
                .join(", "),
            offered: common.to_string(),
        }),
        Err(disagreement) => Some(Misplacement::NoCommonPlatform {
            node: node.to_owned(),
            platform: platform.to_string(),
            disagreement: disagreement.to_string(),
        }),
    }
}

/// The owner that recreates `pod` once it is evicted, if it has one.
pub(crate) fn recreating_owner(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))
        .filter(|owner| {
            let group = owner
                .api_version
                .rsplit_once('/')
                .map_or("", |(group, _)| group);
            RECREATING_OWNERS.contains(&(group, owner.kind.as_str()))
        })
}

/// One misplaced pod, as the audit reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub namespace: String,
    pub pod: String,
    pub node: String,
    pub policy: String,
    /// `Misplacement::kind`.
    pub reason: String,
    /// `Misplacement`'s sentence.
    pub message: String,
    /// The controlling owner that recreates the pod (`Kind/name`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl Finding {
    /// The finding for `pod`, selected by `policy`, misplaced as `why`.
    pub fn new(pod: &Pod, policy: &str, why: &Misplacement) -> Self {
        Finding {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
            node: node(pod).unwrap_or_default().to_owned(),
            policy: policy.to_owned(),
            reason: why.kind().to_owned(),
            message: why.to_string(),
            owner: recreating_owner(pod).map(|owner| format!("{}/{}", owner.kind, owner.name)),
        }
    }
}

/// Of a pass's misplaced pods (`(owner uid, evictable)` each, in order), the ones to evict:
/// evictable, with an owner that recreates them, at most one per owner (as a rolling update with
/// `maxUnavailable: 1`) and [`EVICTIONS_PER_PASS`] in all.
pub(crate) fn to_evict<'a>(found: impl IntoIterator<Item = (Option<&'a str>, bool)>) -> Vec<usize> {
    let mut owners = BTreeSet::new();
    found
        .into_iter()
        .enumerate()
        .filter_map(|(index, (owner, evictable))| {
            (evictable && owner.is_some_and(|owner| owners.insert(owner))).then_some(index)
        })
        .take(EVICTIONS_PER_PASS)
        .collect()
}

#[cfg(test)]
mod tests;
