//! `ocifit placement audit` on a real kube-apiserver with kwok running 1,000 pods on amd64 and
//! arm64 nodes, their images in a real registry: it lists exactly the pods a policy selects whose
//! node's platform their images do not offer (arm64-only images on amd64 nodes and the reverse, an
//! image the registry does not have), and none of the rest — pods of multi-platform images, pods
//! on the right nodes, pods the gate would never select (kube-system, a namespace and a pod
//! opted out) even when they run on the wrong platform — each image read once, the requests
//! printed. The time it takes is measured by the placement_audit bench, not here.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use ocifit_testkit::Cluster;
use serde_json::json;

use crate::support::Env;
use crate::support::objects::linux_node;
use crate::support::placement::create_policy;

const FLEET: &str = "fleet";
const PODS: usize = 1_000;

/// A pod named `name` bound to `node` (kwok runs it), with one container of `image`.
fn bound(name: &str, node: &str, image: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": image}]},
    }))
    .unwrap()
}

/// Waits until `count` pods of the cluster are Running.
async fn wait_running(client: &kube::Client, count: usize) {
    let pods: Api<Pod> = Api::all(client.clone());
    let params = ListParams::default().fields("status.phase=Running");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    loop {
        let running = pods.list_metadata(&params).await.unwrap().items.len();
        if running >= count {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {running} of {count} pods run"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn the_audit_of_a_thousand_running_pods_lists_exactly_the_misplaced_ones() {
    let env = Env::start_with(
        crate::support::ocifit_binary(),
        Cluster::builder().with_kwok(),
    )
    .await;
    let client = env.client.clone();
    for node in ["amd-1", "amd-2", "amd-3", "amd-4", "amd-5"] {
        env.add_node(linux_node(node).resources("64", "256Gi", "300"))
            .await;
    }
    for node in ["arm-1", "arm-2", "arm-3", "arm-4", "arm-5"] {
        env.add_node(
            linux_node(node)
                .label("kubernetes.io/arch", "arm64")
                .resources("64", "256Gi", "300"),
        )
        .await;
    }
    let registry = env.registry();
    let both = registry
        .push_multi_platform("audit/both", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .unwrap();
    let arm = registry
        .push_image("audit/arm", "v1", "linux/arm64")
        .await
        .unwrap();
    let amd = registry
        .push_image("audit/amd", "v1", "linux/amd64")
        .await
        .unwrap();
    let missing = registry.reference("audit/missing:v1");
    for namespace in [FLEET, "legacy"] {
        ocifit_testkit::create_namespace(&client, namespace)
            .await
            .unwrap();
    }
    // A namespace opted out: its misplaced pod is not the audit's.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .patch(
            "legacy",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"labels": {"placement.ocifit.io/enabled": "false"}}}),
            ),
        )
        .await
        .unwrap();
    create_policy(&client, "everything", json!({})).await;

    let fleet: Api<Pod> = Api::namespaced(client.clone(), FLEET);
    let mut misplaced = BTreeSet::new();
    for i in 0..PODS {
        let node = if i % 2 == 0 {
            format!("amd-{}", i % 5 + 1)
        } else {
            format!("arm-{}", i % 5 + 1)
        };
        let on_amd = node.starts_with("amd");
        // Every 50th pod runs an image its node cannot run; every 250th an image the registry
        // does not have; the rest run images built for their node.
        let (image, wrong) = match i {
            i if i % 250 == 7 => (missing.as_str(), true),
            i if i % 50 == 0 && on_amd => (arm.reference.as_str(), true),
            i if i % 50 == 1 && !on_amd => (amd.reference.as_str(), true),
            i if i % 3 == 0 => (both.reference.as_str(), false),
            _ if on_amd => (amd.reference.as_str(), false),
            _ => (arm.reference.as_str(), false),
        };
        let name = format!("app-{i}");
        if wrong {
            misplaced.insert(name.clone());
        }
        fleet
            .create(
                &PostParams::default(),
                &bound(&name, &node, image, json!({"app": "fleet"})),
            )
            .await
            .unwrap();
    }
    // Misplaced too, but never selected: an opted-out pod, an opted-out namespace, kube-system.
    fleet
        .create(
            &PostParams::default(),
            &bound(
                "opted-out",
                "amd-1",
                &arm.reference,
                json!({"placement.ocifit.io/enabled": "false"}),
            ),
        )
        .await
        .unwrap();
    for namespace in ["legacy", "kube-system"] {
        Api::<Pod>::namespaced(client.clone(), namespace)
            .create(
                &PostParams::default(),
                &bound("elsewhere", "amd-1", &arm.reference, json!({})),
            )
            .await
            .unwrap();
    }
    wait_running(&client, PODS + 3).await;
    assert!(misplaced.len() > 20, "{misplaced:?}");

    let output = tokio::process::Command::new(crate::support::ocifit_binary())
        .args(["placement", "audit", "-o", "json", "--plain-http"])
        .arg("--kubeconfig")
        .arg(env.cluster.kubeconfig())
        .output()
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "exit 1: something is misplaced; stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["audited"], PODS,
        "every fleet pod, none of the excluded: {report}"
    );
    let listed: BTreeSet<String> = report["misplaced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|found| {
            assert_eq!(found["namespace"], FLEET, "{found}");
            found["pod"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(listed, misplaced, "exactly the misplaced pods");
    let unknown = report["misplaced"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|found| found["reason"] == "PlatformsUnknown")
        .count();
    assert_eq!(unknown, PODS / 250, "the missing image's pods: {report}");
    let wrong = report["misplaced"]
        .as_array()
        .unwrap()
        .iter()
        .find(|found| found["reason"] == "WrongPlatform")
        .unwrap();
    let message = wrong["message"].as_str().unwrap();
    assert!(message.contains("is linux/"), "{message}");
    // Four images, each read once: an index or manifest and what it names, a few requests each,
    // never one per pod.
    let requests = report["registryRequests"].as_u64().unwrap();
    assert!((4..=40).contains(&requests), "{requests} registry requests");
}
