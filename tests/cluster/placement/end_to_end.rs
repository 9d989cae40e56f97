//! Platform placement end to end on the real control plane (apiserver, kube-scheduler binding for
//! real, kwok nodes of amd64, arm64 and a tainted arm64 pool) and a real registry with images
//! pushed by crane: `ocifit run` (the built binary) serves `/placement` behind a
//! MutatingWebhookConfiguration and runs the controller. Pods are gated at creation, released
//! by the controller, and bound by kube-scheduler only to nodes every container can run on (the
//! tainted pool only with the policy's toleration); the decision is on the pod as annotations and
//! Events. The example policy and Deployment (`example/placement/`) as a newcomer applies them:
//! both replicas on arm64, with Events on each pod and on the ReplicaSet. A registry that hangs
//! follows the policy's failure path with Events naming the image; a pod whose policy was
//! deleted is released, not forgotten; the policy's status counts them;
//! with every replica down, a new pod is created ungated (failurePolicy Ignore) and scheduled.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use ocifit::api::PlacementPolicy;
use ocifit::api::placement_pod::{
    MESSAGE_ANNOTATION, OUTCOME_ANNOTATION, PLATFORMS_ANNOTATION, POLICY_LABEL, SCHEDULING_GATE,
};
use serde_json::json;

use crate::support::objects::linux_node;
use crate::support::placement::{
    self, WAIT, annotation, create_policy, gates, node_name, wait_pod,
};
use crate::support::{Controller, Env};

const NAMESPACE: &str = "shop";
const ARM_POOL: &str = "arm-pool-1";

fn pod(name: &str, labels: serde_json::Value, containers: &[(&str, &str)]) -> Pod {
    placement::pod(name, NAMESPACE, labels, containers)
}

async fn wait_event(client: &kube::Client, kind: &str, name: &str, reason: &str) -> String {
    placement::wait_event(client, NAMESPACE, kind, name, reason).await
}

#[tokio::test]
async fn pods_land_only_where_every_container_runs_and_are_never_left_gated() {
    let env = Env::start_scheduling(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    env.add_node(linux_node("amd-1")).await;
    env.add_node(linux_node("arm-1").label("kubernetes.io/arch", "arm64"))
        .await;
    env.add_node(linux_node(ARM_POOL).label("kubernetes.io/arch", "arm64"))
        .await;
    Api::<Node>::all(client.clone())
        .patch(
            ARM_POOL,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [{"key": "pool", "value": "arm64", "effect": "NoSchedule"}]}})),
        )
        .await
        .expect("the pool tainted");
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    let registry = env.registry();
    let web = registry
        .push_multi_platform("shop/web", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .expect("web");
    let metrics = registry
        .push_image("shop/metrics", "v1", "linux/arm64")
        .await
        .expect("the arm64-only sidecar");
    let legacy = registry
        .push_image("shop/legacy", "v1", "linux/amd64")
        .await
        .expect("the amd64-only sidecar");
    let proxy = registry
        .push_index_with_attestation("shop/proxy", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .expect("an index with attestations");

    let served = placement::serve(&env, "placement-e2e", &["--registry-timeout", "1s"]).await;
    // The newcomer's path: the example namespace label and the example policy, as written.
    env.cluster
        .kubectl(["label", "namespace", NAMESPACE, "placement=enabled"])
        .await
        .expect("the namespace labelled");
    let example = ocifit_testkit::repo_root().join("example/placement");
    env.cluster
        .kubectl([
            "apply",
            "-f",
            &example.join("policy.yaml").display().to_string(),
        ])
        .await
        .expect("the example policy");
    create_policy(
        &client,
        "fail-open",
        json!({
            "priority": 10,
            "podSelector": {"matchLabels": {"case": "registry-down"}},
            "onInspectionFailure": {"attempts": 2, "timeout": "1s", "action": "ReleaseUnconstrained"},
        }),
    )
    .await;
    served
        .gate(&client, "ocifit-placement", NAMESPACE, &web.reference)
        .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let create = async |pod: Pod| {
        let created = pods
            .create(&PostParams::default(), &pod)
            .await
            .expect("created");
        assert_eq!(gates(&created), [SCHEDULING_GATE], "gated at creation");
        let expected = match pod.labels().get("case") {
            Some(_) => "fail-open",
            None => "default",
        };
        assert_eq!(
            created.labels()[POLICY_LABEL],
            expected,
            "labelled with the winner"
        );
    };

    // An arm64-only sidecar beside a multi-platform main container: arm64 nodes only, the
    // tainted pool allowed by the policy's toleration.
    for i in 0..4 {
        create(pod(
            &format!("arm-{i}"),
            json!({}),
            &[("web", &web.reference), ("metrics", &metrics.reference)],
        ))
        .await;
    }
    // An amd64-only sidecar: amd64 only. An index with attestations: both architectures.
    create(pod(
        "amd",
        json!({}),
        &[("web", &web.reference), ("legacy", &legacy.reference)],
    ))
    .await;
    create(pod("proxy", json!({}), &[("proxy", &proxy.reference)])).await;
    for i in 0..4 {
        let placed = wait_pod(&pods, &format!("arm-{i}"), "bound", |p| {
            node_name(p).is_some()
        })
        .await;
        assert!(gates(&placed).is_empty());
        assert!(
            ["arm-1", ARM_POOL].contains(&node_name(&placed).unwrap().as_str()),
            "arm-{i} bound to {:?}",
            node_name(&placed)
        );
        assert_eq!(annotation(&placed, OUTCOME_ANNOTATION), "Constrained");
        assert_eq!(annotation(&placed, PLATFORMS_ANNOTATION), "linux/arm64");
    }
    let note = wait_event(&client, "Pod", "arm-0", "Placed").await;
    assert!(note.contains("linux/arm64"), "{note}");
    let amd = wait_pod(&pods, "amd", "bound", |p| node_name(p).is_some()).await;
    assert_eq!(node_name(&amd).as_deref(), Some("amd-1"));
    assert_eq!(annotation(&amd, PLATFORMS_ANNOTATION), "linux/amd64");
    let proxied = wait_pod(&pods, "proxy", "bound", |p| node_name(p).is_some()).await;
    assert_eq!(
        annotation(&proxied, PLATFORMS_ANNOTATION),
        "linux/amd64,linux/arm64"
    );

    // A pod whose policy was deleted is released, without a constraint, saying why.
    let mut orphan = pod(
        "orphan",
        json!({ POLICY_LABEL: "gone" }),
        &[("web", &web.reference)],
    );
    orphan.spec.as_mut().unwrap().scheduling_gates =
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: SCHEDULING_GATE.into(),
        }]);
    pods.create(&PostParams::default(), &orphan)
        .await
        .expect("created");
    let released = wait_pod(&pods, "orphan", "released", |p| gates(p).is_empty()).await;
    assert_eq!(annotation(&released, OUTCOME_ANNOTATION), "Unconstrained");
    assert!(
        annotation(&released, MESSAGE_ANNOTATION)
            .contains("placement policy gone no longer exists")
    );

    // The registry hangs: inspection fails with Events naming the image, and after the bound the
    // policy's action (release unconstrained) applies.
    let rebuilt = registry
        .push_image("shop/new", "v1", "linux/arm64")
        .await
        .expect("an image not yet inspected");
    registry.pause().expect("the registry frozen");
    create(pod(
        "down",
        json!({"case": "registry-down"}),
        &[("new", &rebuilt.reference)],
    ))
    .await;
    let note = wait_event(&client, "Pod", "down", "InspectionFailed").await;
    assert!(
        note.contains(&rebuilt.reference),
        "the Event names the image: {note}"
    );
    let released = wait_pod(&pods, "down", "released", |p| gates(p).is_empty()).await;
    registry.resume().expect("the registry thawed");
    assert_eq!(annotation(&released, OUTCOME_ANNOTATION), "Unconstrained");
    wait_event(&client, "Pod", "down", "ReleasedUnconstrained").await;

    // The status counts the pods each policy gated.
    wait_status(&client, &served.controller, "default", 6).await;
    wait_status(&client, &served.controller, "fail-open", 1).await;

    // The example Deployment (its images replaced by the ones pushed here): both replicas on
    // arm64 nodes, with Placed Events on each pod and on its ReplicaSet.
    let deployment = std::fs::read_to_string(example.join("deployment.yaml"))
        .expect("the example Deployment")
        .replace("127.0.0.1:5000/shop/web:v1", &web.reference)
        .replace("127.0.0.1:5000/shop/metrics-arm:v1", &metrics.reference);
    env.cluster
        .kubectl_with_input(["apply", "-f", "-"], &deployment)
        .await
        .expect("the example Deployment applied");
    let start = Instant::now();
    let replicas = loop {
        let listed = pods
            .list(&kube::api::ListParams::default().labels("app=web"))
            .await
            .expect("the Deployment's pods");
        if listed.items.len() == 2 && listed.items.iter().all(|p| node_name(p).is_some()) {
            break listed.items;
        }
        assert!(
            start.elapsed() < WAIT,
            "the Deployment's pods: {:?}",
            listed
                .items
                .iter()
                .map(|p| (p.name_any(), gates(p), node_name(p)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for replica in &replicas {
        assert!(["arm-1", ARM_POOL].contains(&node_name(replica).unwrap().as_str()));
        assert_eq!(annotation(replica, PLATFORMS_ANNOTATION), "linux/arm64");
        wait_event(&client, "Pod", &replica.name_any(), "Placed").await;
    }
    let owner = replicas[0].owner_references()[0].name.clone();
    let note = wait_event(&client, "ReplicaSet", &owner, "Placed").await;
    assert!(note.starts_with("pod web-"), "{note}");

    // Every replica down, under the chart's failurePolicy (Ignore): a new pod is created
    // without the gate and scheduled as without ocifit; nothing waits for ocifit.
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            "ocifit-placement",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([
                    {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}
                ]))
                .expect("a patch"),
            ),
        )
        .await
        .expect("failurePolicy Ignore");
    assert!(served.controller.stop().await.success());
    let ungated = pods
        .create(
            &PostParams::default(),
            &pod(
                "while-down",
                json!({}),
                &[("web", &web.reference), ("metrics", &metrics.reference)],
            ),
        )
        .await
        .expect("created while ocifit is down");
    assert!(
        gates(&ungated).is_empty(),
        "never gated while ocifit is down"
    );
    wait_pod(&pods, "while-down", "bound", |p| node_name(p).is_some()).await;
}

/// Waits until policy `name` is Ready with `released` pods released and none gated.
async fn wait_status(client: &kube::Client, controller: &Controller, name: &str, released: i32) {
    let policies: Api<PlacementPolicy> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let status = policies.get(name).await.expect("the policy").status;
        let done = status.as_ref().is_some_and(|s| {
            s.pods.released == released
                && s.pods.gated == 0
                && s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if done {
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "status of {name}: {status:?}; log:\n{}",
            controller.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
