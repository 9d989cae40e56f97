//! The way out: `ocifit placement release-all` removes ocifit's scheduling gate from every pod
//! that still carries it (after an uninstall, or while every replica is down), leaving any
//! other gate alone. Each pod is patched by a JSON patch that first tests the gate is still at
//! the index it was read at, so a pod changed meanwhile is read again, never stripped of
//! another gate. A pod that cannot be released does not stop the others: every failure is
//! reported at the end.
//!
//! `ocifit placement untaint` is the same for node tainting: it removes ocifit's taint
//! (`placement.ocifit.io/arch`) from every node, by a merge patch carrying the resourceVersion
//! read (a node changed meanwhile is read again, never stripped of another writer's taint), and
//! leaves every other taint alone.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

use super::taints;
use crate::api::placement::pod::{POLICY_LABEL, SCHEDULING_GATE};

/// Attempts per pod when it keeps changing under the patch.
const ATTEMPTS: usize = 5;

/// What release-all did.
#[derive(Debug, Default)]
pub struct Released {
    /// `namespace/name` of every pod released.
    pub pods: Vec<String>,
    /// Every pod that could not be released, and why.
    pub failed: Vec<WayOutError>,
}

/// Releasing failed.
#[derive(Debug, thiserror::Error)]
pub enum WayOutError {
    /// The gated pods could not be listed.
    #[error("failed to list the pods labelled {POLICY_LABEL}")]
    List(#[source] kube::Error),
    /// A pod could not be patched.
    #[error("failed to remove the gate from pod {pod}")]
    Patch {
        pod: String,
        #[source]
        source: kube::Error,
    },
    /// A pod kept changing under the patch.
    #[error(
        "failed to remove the gate from pod {pod}: it changed under every one of {ATTEMPTS} attempts"
    )]
    KeptChanging { pod: String },
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
pub fn untaint_patch(node: &Node) -> Option<serde_json::Value> {
    let taints = node.spec.as_ref()?.taints.as_deref()?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let kept = taints::plan(&labels, taints, &BTreeSet::new())?;
    Some(serde_json::json!({
        "metadata": {"resourceVersion": node.resource_version()},
        "spec": {"taints": if kept.is_empty() { None } else { Some(kept) }},
    }))
}

/// Removes ocifit's taint from every node that carries it; a node that cannot be untainted is
/// recorded in the result and the others still are. `Err` only when the nodes could not be
/// listed at all. While a policy still taints an architecture, a running ocifit taints its
/// nodes again.
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
        match untaint_one(&api, &name, node).await {
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

/// Removes ocifit's taint from one node: `Ok(true)` removed, `Ok(false)` nothing left to remove
/// (gone, or untainted meanwhile), `Err(None)` it changed under every attempt.
async fn untaint_one(
    api: &Api<Node>,
    name: &str,
    mut current: Node,
) -> Result<bool, Option<kube::Error>> {
    for _ in 0..ATTEMPTS {
        let Some(patch) = untaint_patch(&current) else {
            return Ok(false);
        };
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            // Changed since it was read: read again.
            Err(kube::Error::Api(status)) if status.code == 409 => match api.get_opt(name).await {
                Ok(Some(node)) => current = node,
                Ok(None) => return Ok(false),
                Err(source) => return Err(Some(source)),
            },
            Err(source) => return Err(Some(source)),
        }
    }
    Err(None)
}

/// The JSON patch removing ocifit's gate from `pod`, if it carries it.
pub fn removal(pod: &Pod) -> Option<json_patch::Patch> {
    let index = pod
        .spec
        .as_ref()?
        .scheduling_gates
        .as_ref()?
        .iter()
        .position(|gate| gate.name == SCHEDULING_GATE)?;
    let path = format!("/spec/schedulingGates/{index}");
    serde_json::from_value(serde_json::json!([
        {"op": "test", "path": format!("{path}/name"), "value": SCHEDULING_GATE},
        {"op": "remove", "path": path},
    ]))
    .ok()
}

/// Removes ocifit's gate from every pod in the cluster that carries it; a pod that cannot be
/// released is recorded in the result and the others are still released. `Err` only when the
/// pods could not be listed at all.
pub async fn release_all(client: Client) -> Result<Released, WayOutError> {
    let all: Api<Pod> = Api::all(client.clone());
    let listed = all
        .list(&ListParams::default().labels(POLICY_LABEL))
        .await
        .map_err(WayOutError::List)?;
    let mut released = Released::default();
    for pod in listed.items.iter().filter(|pod| removal(pod).is_some()) {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let pod_name = format!("{namespace}/{name}");
        match release_one(&api, &name, pod.clone()).await {
            Ok(true) => released.pods.push(pod_name),
            Ok(false) => {}
            Err(source) => released.failed.push(match source {
                Some(source) => WayOutError::Patch {
                    pod: pod_name,
                    source,
                },
                None => WayOutError::KeptChanging { pod: pod_name },
            }),
        }
    }
    Ok(released)
}

/// Removes the gate from one pod: `Ok(true)` released, `Ok(false)` nothing left to release (gone,
/// or released meanwhile), `Err(None)` it changed under every attempt.
async fn release_one(
    api: &Api<Pod>,
    name: &str,
    mut current: Pod,
) -> Result<bool, Option<kube::Error>> {
    for _ in 0..ATTEMPTS {
        let Some(patch) = removal(&current) else {
            return Ok(false);
        };
        match api
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            // The test failed (the gates moved) or a conflict: read again.
            Err(kube::Error::Api(status)) if status.code == 422 || status.code == 409 => {
                match api.get_opt(name).await {
                    Ok(Some(pod)) => current = pod,
                    Ok(None) => return Ok(false),
                    Err(source) => return Err(Some(source)),
                }
            }
            Err(source) => return Err(Some(source)),
        }
    }
    Err(None)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSchedulingGate;

    use super::*;
    use crate::placement::fixtures::pod;

    fn with_gates(names: &[&str]) -> Pod {
        let mut pod = pod(&[("web", "nginx")]);
        pod.spec.as_mut().unwrap().scheduling_gates = Some(
            names
                .iter()
                .map(|name| PodSchedulingGate {
                    name: (*name).to_owned(),
                })
                .collect(),
        );
        pod
    }

    #[test]
    fn the_removal_takes_only_ocifits_gate_and_tests_it_is_still_there() {
        let gated = with_gates(&["example.com/quota", SCHEDULING_GATE]);
        let patch = removal(&gated).unwrap();
        let mut object = serde_json::to_value(&gated).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        let released: Pod = serde_json::from_value(object).unwrap();
        assert_eq!(
            released.spec.unwrap().scheduling_gates.unwrap(),
            vec![PodSchedulingGate {
                name: "example.com/quota".into()
            }]
        );
        // Applied to a pod whose gates moved, the test fails instead of removing another gate.
        let moved = with_gates(&["example.com/quota"]);
        let mut object = serde_json::to_value(&moved).unwrap();
        assert!(json_patch::patch(&mut object, &patch).is_err());
    }

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
            (crate::api::placement::pod::TAINT_KEY, "arm64"),
        ]);
        let patch = untaint_patch(&node).unwrap();
        assert_eq!(
            patch,
            serde_json::json!({
                "metadata": {"resourceVersion": "42"},
                "spec": {"taints": [{"key": "pool", "value": "arm", "effect": "NoSchedule"}]},
            })
        );
        let only_ours = node_with_taints(&[(crate::api::placement::pod::TAINT_KEY, "arm64")]);
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

    #[test]
    fn a_pod_without_ocifits_gate_needs_no_removal() {
        assert!(removal(&with_gates(&["example.com/quota"])).is_none());
        assert!(removal(&pod(&[("web", "nginx")])).is_none());
    }
}
