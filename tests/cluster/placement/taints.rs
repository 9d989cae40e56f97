//! Node tainting on a real apiserver: a policy's `nodeTainting.architectures: [arm64]` taints
//! the arm64 node `placement.ocifit.io/arch=arm64:NoSchedule` beside the taint it had, leaves
//! the amd64 node alone, and once no policy taints arm64 any more the taint goes (the node's
//! own stays).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use ocifit::api::PlacementPolicy;
use ocifit::api::placement_pod::TAINT_KEY;
use serde_json::json;

use crate::support::objects::linux_node;
use crate::support::placement::{WAIT, create_policy};
use crate::support::{Controller, Env};

fn taints(node: &Node) -> Vec<(String, Option<String>)> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|Taint { key, value, .. }| (key.clone(), value.clone()))
        .collect()
}

async fn wait_taints(nodes: &Api<Node>, name: &str, expected: &[(&str, &str)]) {
    let expected: Vec<(String, Option<String>)> = expected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
        .collect();
    let start = Instant::now();
    loop {
        let node = nodes.get(name).await.expect("the node");
        if taints(&node) == expected {
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "{name}: {:?}, expected {expected:?}",
            taints(&node)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_tainted_architectures_nodes_carry_ocifits_taint_only_while_a_policy_says_so() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    env.add_node(linux_node("amd-1")).await;
    env.add_node(linux_node("arm-1").label("kubernetes.io/arch", "arm64"))
        .await;
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            "arm-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [{"key": "pool", "value": "arm64", "effect": "NoSchedule"}]}})),
        )
        .await
        .expect("the node's own taint");
    let _controller = Controller::start(&env, "placement-taints", &[]).await;
    create_policy(
        &client,
        "arm",
        json!({"nodeTainting": {"architectures": ["arm64"]}}),
    )
    .await;
    wait_taints(&nodes, "arm-1", &[("pool", "arm64"), (TAINT_KEY, "arm64")]).await;
    wait_taints(&nodes, "amd-1", &[]).await;

    Api::<PlacementPolicy>::all(client.clone())
        .delete("arm", &DeleteParams::default())
        .await
        .expect("the policy deleted");
    wait_taints(&nodes, "arm-1", &[("pool", "arm64")]).await;
}
