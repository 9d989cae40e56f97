//! `requireNodeLabels` end to end on the real control plane (apiserver, kube-scheduler binding
//! for real, kwok nodes): with arm64 nodes inside and outside the pool a policy requires for
//! arm64, pods whose only image is arm64 are released pinned to that pool's label and bound only
//! to the node carrying it.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::support::Env;
use crate::support::objects::linux_node;
use crate::support::placement::{self, create_policy, node_name, wait_pod};

const NAMESPACE: &str = "pools";
const POOL: &str = "node.example.com/pool";
const IN_POOL: &str = "arm-graviton";

#[tokio::test]
async fn pods_land_only_on_nodes_carrying_their_architectures_required_labels() {
    let env = Env::start_scheduling(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    env.add_node(linux_node("amd-1")).await;
    env.add_node(linux_node("arm-plain").label("kubernetes.io/arch", "arm64"))
        .await;
    env.add_node(
        linux_node(IN_POOL)
            .label("kubernetes.io/arch", "arm64")
            .label(POOL, "graviton"),
    )
    .await;
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    let app = env
        .registry()
        .push_image("pools/app", "v1", "linux/arm64")
        .await
        .expect("an arm64-only image");
    let served = placement::serve(&env, "placement-node-labels", &[]).await;
    create_policy(
        &client,
        "graviton",
        json!({"architectures": [{"name": "arm64", "requireNodeLabels": {POOL: "graviton"}}]}),
    )
    .await;
    served
        .gate(&client, "ocifit-placement", NAMESPACE, &app.reference)
        .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..6 {
        let pod = placement::pod(
            &format!("app-{i}"),
            NAMESPACE,
            json!({}),
            &[("app", &app.reference)],
        );
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("created");
    }
    for i in 0..6 {
        let placed = wait_pod(&pods, &format!("app-{i}"), "bound", |p| {
            node_name(p).is_some()
        })
        .await;
        assert_eq!(node_name(&placed).as_deref(), Some(IN_POOL), "app-{i}");
        let terms = placed
            .spec
            .and_then(|s| s.affinity)
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .map(|r| r.node_selector_terms)
            .unwrap_or_default();
        let keys: Vec<String> = terms
            .iter()
            .flat_map(|t| t.match_expressions.iter().flatten())
            .map(|e| format!("{} {} {:?}", e.key, e.operator, e.values))
            .collect();
        assert!(
            keys.contains(&format!("{POOL} In Some([\"graviton\"])")),
            "app-{i}: {keys:?}"
        );
    }
}
