//! Keeps node taints as the policies' node tainting says (leader only): every node is looked at
//! when the set of tainted architectures changes, and a node when its labels change. A node is
//! read with `get` and written with a merge patch that carries the resourceVersion read (a
//! concurrent change makes it look again next time, never lose another writer's taint).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::cluster::Change;
use crate::cluster::ClusterView;
use crate::placement::planner::UsablePolicies;
use crate::placement::planner::plan_taints;

/// Least time between two passes over every node.
const PAUSE: Duration = Duration::from_millis(500);

/// Runs until the streams end.
pub(crate) async fn keep_node_taints(cluster: ClusterView, policies: UsablePolicies) {
    enum Wake {
        Policies,
        Node(String),
    }
    let wakes = futures_util::stream::select(
        policies.changes().map(|()| Wake::Policies),
        cluster.nodes.subscribe().filter_map(|change| {
            std::future::ready(match change {
                Change::Applied(node) => Some(Wake::Node(node.name().to_owned())),
                Change::Synced => Some(Wake::Policies),
                Change::Deleted(_) => None,
            })
        }),
    )
    .ready_chunks(1024);
    let mut wakes = std::pin::pin!(wakes);
    let api: Api<Node> = Api::all(cluster.client.clone());
    let mut applied: Option<BTreeSet<String>> = None;
    while let Some(batch) = wakes.next().await {
        if !cluster.leadership.is_leader() || !policies.stored() || !cluster.nodes.synced() {
            // A new leader looks at every node.
            applied = None;
            continue;
        }
        let now = policies.set().tainted();
        let everything = applied.as_ref() != Some(&now);
        let names: BTreeSet<String> = if everything {
            cluster
                .nodes
                .store()
                .state()
                .iter()
                .map(|node| node.name().to_owned())
                .collect()
        } else {
            batch
                .into_iter()
                .filter_map(|wake| match wake {
                    Wake::Node(name) => Some(name),
                    Wake::Policies => None,
                })
                .collect()
        };
        for name in names {
            apply(&api, &name, &now).await;
        }
        applied = Some(now);
        tokio::time::sleep(PAUSE).await;
    }
}

async fn apply(api: &Api<Node>, name: &str, tainted: &BTreeSet<String>) {
    let node = match api.get_opt(name).await {
        Ok(Some(node)) => node,
        Ok(None) => return,
        Err(err) => {
            tracing::warn!(node = name, error = %err, "failed to read a node for tainting");
            return;
        }
    };
    let empty = BTreeMap::new();
    let taints = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default();
    let Some(planned) = plan_taints(
        node.metadata.labels.as_ref().unwrap_or(&empty),
        taints,
        tainted,
    ) else {
        return;
    };
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": node.resource_version()},
        "spec": {"taints": planned},
    });
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => tracing::info!(node = name, "node taints updated for placement"),
        Err(err) => tracing::warn!(node = name, error = %err, "failed to update a node's taints"),
    }
}
