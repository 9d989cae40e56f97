//! The way out: `ocifit placement release-all` removes placement's scheduling gate ([`GATE`])
//! from every pod that still carries it, through [`crate::cluster::gates`] (after an uninstall,
//! or while every replica is down).
//!
//! `ocifit placement untaint` is the same for node tainting: it removes ocifit's taint
//! (`placement.ocifit.io/arch`) from every node, by a merge patch carrying the resourceVersion
//! read (a node changed meanwhile is read again, never stripped of another writer's taint), and
//! leaves every other taint alone.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch};
use kube::{Api, Client, ResourceExt};

use crate::api::placement_pod::{POLICY_LABEL, SCHEDULING_GATE};
use crate::cluster::Gate;
use crate::cluster::{ATTEMPTS, patch_as_read};
use crate::placement::planner::plan_taints;

/// Placement's scheduling gate, on every pod it holds (each carries the tracking label).
pub const GATE: Gate = Gate {
    name: SCHEDULING_GATE,
    label: POLICY_LABEL,
};

/// Untainting failed.
#[derive(Debug, thiserror::Error)]
pub enum WayOutError {
    /// The nodes could not be listed.
    #[error("failed to list the nodes")]
    ListNodes(#[source] kube::Error),
    /// A node could not be patched.
    #[error("failed to remove ocifit's taint from node {node}")]
    Untaint {
        node: String,
        #[source]
        source: kube::Error,
    },
    /// A node kept changing under the patch.
    #[error(
        "failed to remove ocifit's taint from node {node}: it changed under every one of {ATTEMPTS} attempts"
    )]
    NodeKeptChanging { node: String },
}

/// What untaint did.
#[derive(Debug, Default)]
pub struct Untainted {
    /// The name of every node whose taint was removed.
    pub nodes: Vec<String>,
    /// Every node whose taint could not be removed, and why.
    pub failed: Vec<WayOutError>,
}

/// The merge patch removing ocifit's taint from `node` (every other taint kept), if it carries
/// it; it carries the resourceVersion read, so it is refused if the node changed since.
pub(super) fn untaint_patch(node: &Node) -> Option<serde_json::Value> {
    let taints = node.spec.as_ref()?.taints.as_deref()?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let kept = plan_taints(&labels, taints, &BTreeSet::new())?;
    Some(serde_json::json!({
        "metadata": {"resourceVersion": node.resource_version()},
        "spec": {"taints": if kept.is_empty() { None } else { Some(kept) }},
    }))
}

/// Removes ocifit's taint from every node carrying it; a node that cannot be untainted is recorded
/// and the others still are. `Err` only when the nodes cannot be listed. A running ocifit taints
/// again for a policy that still taints an architecture.
pub async fn untaint_all(client: Client) -> Result<Untainted, WayOutError> {
    let api: Api<Node> = Api::all(client);
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(WayOutError::ListNodes)?;
    let mut untainted = Untainted::default();
    let tainted: BTreeMap<String, Node> = listed
        .items
        .into_iter()
        .filter(|node| untaint_patch(node).is_some())
        .map(|node| (node.name_any(), node))
        .collect();
    for (name, node) in tainted {
        let untainted_one = patch_as_read(&api, &name, node, &[409], |node| {
            untaint_patch(node).map(Patch::Merge)
        });
        match untainted_one.await {
            Ok(true) => untainted.nodes.push(name),
            Ok(false) => {}
            Err(Some(source)) => untainted
                .failed
                .push(WayOutError::Untaint { node: name, source }),
            Err(None) => untainted
                .failed
                .push(WayOutError::NodeKeptChanging { node: name }),
        }
    }
    Ok(untainted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_with_taints(taints: &[(&str, &str)]) -> Node {
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some("arm-1".into()),
                resource_version: Some("42".into()),
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/arch".to_owned(),
                    "arm64".to_owned(),
                )])),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(key, value)| k8s_openapi::api::core::v1::Taint {
                            key: (*key).into(),
                            value: Some((*value).into()),
                            effect: "NoSchedule".into(),
                            time_added: None,
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn untainting_removes_only_ocifits_taint_and_is_refused_if_the_node_changed() {
        let node = node_with_taints(&[
            ("pool", "arm"),
            (crate::api::placement_pod::TAINT_KEY, "arm64"),
        ]);
        let patch = untaint_patch(&node).unwrap();
        assert_eq!(
            patch,
            serde_json::json!({
                "metadata": {"resourceVersion": "42"},
                "spec": {"taints": [{"key": "pool", "value": "arm", "effect": "NoSchedule"}]},
            })
        );
        let only_ours = node_with_taints(&[(crate::api::placement_pod::TAINT_KEY, "arm64")]);
        assert_eq!(
            untaint_patch(&only_ours).unwrap()["spec"]["taints"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn a_node_without_ocifits_taint_needs_no_patch() {
        assert!(untaint_patch(&node_with_taints(&[("pool", "arm")])).is_none());
        assert!(untaint_patch(&node_with_taints(&[])).is_none());
        assert!(untaint_patch(&Node::default()).is_none());
    }
}
