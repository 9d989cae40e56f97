//! Which policy, if any, selects a pod at admission: the always-excluded pods first (kube-system,
//! ocifit's namespace, DaemonSet pods, pods already bound with `spec.nodeName`, mirror pods, pods
//! opted out by label), then every usable policy whose namespace and pod selectors match; the
//! highest priority wins, then the name that sorts first. The controller asks again, of the one
//! policy a gated pod names ([`recheck`]): the label is the pod author's to write, so it proves
//! nothing by itself.

use std::collections::BTreeMap;
use std::fmt;

use super::pod_view::PodView;
use super::policy::Policy;
use crate::api::placement_pod::{ENABLED_LABEL, EXCLUDED_NAMESPACES, OPT_OUT_VALUE, POLICY_LABEL};

/// The annotation the kubelet puts on mirror pods of static pods.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Why a pod is never selected, whatever the policies say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    /// kube-system: the cluster's own machinery must never wait for ocifit.
    SystemNamespace,
    /// ocifit's own namespace: ocifit must never wait for itself.
    OwnNamespace,
    /// Owned by a DaemonSet, which places its pods on every node on purpose.
    DaemonSet,
    /// Already bound to a node (`spec.nodeName`): a gate would never be honoured.
    BoundToNode,
    /// A kubelet's mirror of a static pod: read-only.
    Mirror,
    /// Labelled `placement.ocifit.io/enabled: "false"`.
    OptedOut,
    /// In a namespace labelled `placement.ocifit.io/enabled: "false"`.
    NamespaceOptedOut,
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SystemNamespace => "pods in kube-system are never placed",
            Self::OwnNamespace => "pods in ocifit's own namespace are never placed",
            Self::DaemonSet => "DaemonSet pods are never placed",
            Self::BoundToNode => "the pod is already bound to a node (spec.nodeName)",
            Self::Mirror => "mirror pods are never placed",
            Self::OptedOut => "the pod opted out (placement.ocifit.io/enabled: \"false\")",
            Self::NamespaceOptedOut => {
                "the pod's namespace opted out (placement.ocifit.io/enabled: \"false\")"
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Selection<'p> {
    /// Never selected.
    Excluded(Exclusion),
    /// No policy selects the pod.
    Unselected,
    /// The winning policy.
    Selected(&'p Policy),
}

/// The pod's namespace as admission sees it: its name and labels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Namespace<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// Why `pod` in `namespace` is never selected, if it is not.
fn exclusion(pod: PodView<'_>, namespace: Namespace<'_>, own_namespace: &str) -> Option<Exclusion> {
    let metadata = pod.metadata;
    if EXCLUDED_NAMESPACES.contains(&namespace.name) {
        return Some(Exclusion::SystemNamespace);
    }
    if namespace.name == own_namespace {
        return Some(Exclusion::OwnNamespace);
    }
    if opted_out(Some(namespace.labels)) {
        return Some(Exclusion::NamespaceOptedOut);
    }
    let owned_by_daemonset = metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.kind == "DaemonSet" && owner.api_version.starts_with("apps/"));
    if owned_by_daemonset {
        return Some(Exclusion::DaemonSet);
    }
    let bound = pod.node_name.is_some_and(|name| !name.is_empty());
    if bound {
        return Some(Exclusion::BoundToNode);
    }
    if metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(MIRROR_ANNOTATION))
    {
        return Some(Exclusion::Mirror);
    }
    if opted_out(metadata.labels.as_ref()) {
        return Some(Exclusion::OptedOut);
    }
    None
}

/// Whether `labels` opt their pod or namespace out.
fn opted_out(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|labels| labels.get(ENABLED_LABEL))
        .is_some_and(|value| value == OPT_OUT_VALUE)
}

/// The policy that selects `pod` in `namespace`, if any: unless the pod is excluded, among
/// `policies` (the usable ones) whose selectors match, the highest priority, then the name that
/// sorts first.
pub(crate) fn select<'a, 'p>(
    pod: impl Into<PodView<'a>>,
    namespace: Namespace<'_>,
    own_namespace: &str,
    policies: &'p [Policy],
) -> Selection<'p> {
    let pod = pod.into();
    if let Some(exclusion) = exclusion(pod, namespace, own_namespace) {
        return Selection::Excluded(exclusion);
    }
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    policies
        .iter()
        .filter(|policy| policy.selects_namespace(namespace.labels) && policy.selects_pod(labels))
        .min_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.name.cmp(&b.name))
        })
        .map_or(Selection::Unselected, Selection::Selected)
}

/// Why the policy a gated pod names may not act on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotSelected {
    /// The pod is never selected, whatever a policy says.
    #[error("{0}")]
    Excluded(Exclusion),
    /// The policy's namespace or pod selector does not match the pod.
    #[error(
        "placement policy {policy} does not select this pod (its {selector} does not match); the \
         pod's {POLICY_LABEL} label alone does not bring a pod under a policy"
    )]
    Foreign {
        policy: String,
        selector: &'static str,
    },
}

/// Whether `policy`, named by a gated pod's tracking label in `namespace`, still selects it: the
/// exclusions and the policy's selectors, as admission applied them. Priority is not asked again:
/// admission chose the winner, and later policy edits never move a gated pod.
pub(crate) fn recheck<'a>(
    pod: impl Into<PodView<'a>>,
    namespace: Namespace<'_>,
    own_namespace: &str,
    policy: &Policy,
) -> Result<(), NotSelected> {
    let pod = pod.into();
    if let Some(exclusion) = exclusion(pod, namespace, own_namespace) {
        return Err(NotSelected::Excluded(exclusion));
    }
    let foreign = |selector| NotSelected::Foreign {
        policy: policy.name.clone(),
        selector,
    };
    if !policy.selects_namespace(namespace.labels) {
        return Err(foreign("namespaceSelector"));
    }
    // Admission matched the labels the pod was created with, before the tracking label.
    let mut labels = pod.metadata.labels.clone().unwrap_or_default();
    labels.remove(POLICY_LABEL);
    if !policy.selects_pod(&labels) {
        return Err(foreign("podSelector"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
