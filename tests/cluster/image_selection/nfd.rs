//! An NFD image-compatibility artifact evaluated against NFD NodeFeature objects: NFD's CRD (from
//! its Go module's YAML) installed while the controller runs is found, NodeFeature objects split
//! the nodes into classes by the features the artifact reads, and a feature change moves a node.

use std::time::Duration;

use ocifit_testkit::{OrasArtifact, Tool};

use crate::support::objects::linux_node;
use crate::support::{Controller, Env, images};

const NFD_LAYER: &str = "application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml";
const NFD_ARTIFACT: &str = "application/vnd.nfd.image-compatibility.v1alpha1";

fn node_feature(node: &str, flags: &[&str]) -> String {
    let elements: serde_json::Map<String, serde_json::Value> = flags
        .iter()
        .map(|f| ((*f).to_owned(), serde_json::json!({})))
        .collect();
    serde_json::json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": node,
            "namespace": "node-feature-discovery",
            "labels": {"nfd.node.kubernetes.io/node-name": node}
        },
        "spec": {"features": {"flags": {"cpu.cpuid": {"elements": elements}}}}
    })
    .to_string()
}

#[tokio::test]
async fn nfd_artifact_follows_node_features() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let registry = env.registry();
    for tag in ["v1-avx512", "v1-avx2", "v1-generic"] {
        registry
            .push_image("acme/app", tag, "linux/amd64")
            .await
            .expect("crane push");
    }
    let image = |tag: &str| registry.reference(&format!("acme/app:{tag}"));
    let spec = format!(
        "version: v1alpha1\ncompatibilities:\n\
         - tag: {avx512}\n  weight: 20\n  rules:\n  - name: avx512\n    matchFeatures:\n    - feature: cpu.cpuid\n      matchName: {{op: InRegexp, value: [\"^AVX512\"]}}\n\
         - tag: {avx2}\n  weight: 10\n  rules:\n  - name: avx2\n    matchFeatures:\n    - feature: cpu.cpuid\n      matchExpressions:\n        AVX2: {{op: Exists}}\n\
         - tag: {generic}\n  rules: []\n",
        avx512 = image("v1-avx512"),
        avx2 = image("v1-avx2"),
        generic = image("v1-generic"),
    );
    let file = registry.dir().join("nfd-compat.yaml");
    std::fs::write(&file, spec).expect("the artifact file");
    registry
        .push_artifact(
            &OrasArtifact::new(&registry.reference("acme/app-compat:v1"), &file, NFD_LAYER)
                .artifact_type(NFD_ARTIFACT),
        )
        .await
        .expect("oras push");
    env.add_node(linux_node("fast")).await;
    env.add_node(linux_node("older")).await;
    ocifit_testkit::create_namespace(&env.client, "node-feature-discovery")
        .await
        .expect("the NFD namespace");
    let controller = Controller::start(&env, "nfd", &["--nfd-discovery-interval", "1s"]).await;

    without_nfd_the_nodes_look_alike_and_get_the_portable_build(&env, &image).await;
    node_feature_objects_split_the_nodes_by_the_features_read(&env, &image).await;
    a_feature_change_moves_the_node(&env, &image).await;

    assert!(controller.stop().await.success());
}

async fn without_nfd_the_nodes_look_alike_and_get_the_portable_build(
    env: &Env,
    image: &impl Fn(&str) -> String,
) {
    env.create_policy(&env.policy_on("nfd", "acme/app-compat:v1"))
        .await;
    let status = env.wait_ready("nfd").await;
    assert_eq!(images(&status), [Some(image("v1-generic"))]);
    assert_eq!(status.artifact.expect("artifact").format.as_str(), "nfd");
}

/// NFD appears while the controller runs: its CRD, then NodeFeature objects per node.
async fn node_feature_objects_split_the_nodes_by_the_features_read(
    env: &Env,
    image: &impl Fn(&str) -> String,
) {
    env.cluster
        .kubectl([
            "apply",
            "-f",
            &env.cluster
                .tools()
                .path(Tool::NfdCrds)
                .expect("NFD's CRDs from tools/install")
                .display()
                .to_string(),
        ])
        .await
        .expect("NFD's CRDs");
    env.cluster
        .kubectl([
            "wait",
            "--for=condition=established",
            "--timeout=60s",
            "crd/nodefeatures.nfd.k8s-sigs.io",
        ])
        .await
        .expect("NFD's NodeFeature CRD is established");
    for (node, flags) in [("fast", &["AVX512F", "AVX2"][..]), ("older", &["AVX2"][..])] {
        env.cluster
            .kubectl_with_input(["apply", "-f", "-"], &node_feature(node, flags))
            .await
            .expect("a NodeFeature");
    }
    // Each NodeFeature moves its node on its own: wait for both, not for the first two classes.
    let split = [Some(image("v1-avx2")), Some(image("v1-avx512"))];
    let (status, _) = env
        .wait_status("nfd", Duration::from_secs(20), "two classes", |s| {
            s.class_count == 2 && images(s) == split
        })
        .await;
    assert_eq!(status.classes.iter().map(|c| c.nodes).sum::<i32>(), 2);
}

async fn a_feature_change_moves_the_node(env: &Env, image: &impl Fn(&str) -> String) {
    env.cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &node_feature("older", &["AVX512F", "AVX2"]),
        )
        .await
        .expect("an updated NodeFeature");
    let (status, _) = env
        .wait_status("nfd", Duration::from_secs(10), "one class", |s| {
            s.class_count == 1
        })
        .await;
    assert_eq!(images(&status), [Some(image("v1-avx512"))]);
    assert_eq!(status.classes[0].nodes, 2);
}
