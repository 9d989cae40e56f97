//! The controller's running-pod audit with `misplaced: Evict`, on the real control plane
//! (kube-controller-manager, kube-scheduler, kwok nodes): pods created before their policy run on
//! an amd64 node though their only image is arm64. Once the policy exists and the audit runs
//! (every 10 s), the Deployment's pod is evicted once and its replacement is gated and placed on
//! the arm64 node; a pod without a controller is only reported; a pod whose
//! PodDisruptionBudget allows no disruption is reported and left running (the eviction's 429 is
//! not forced). Each misplaced pod counts once in the policy's `status.pods.misplaced`.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use ocifit::api::PlacementPolicy;
use serde_json::json;

use crate::support::Env;
use crate::support::objects::linux_node;
use crate::support::placement::{self, annotation, create_policy, events, node_name, wait_event};

const NAMESPACE: &str = "misplaced";
/// Long enough for two audit passes (10 s apart) and a replacement's placement on a loaded machine.
const PASSES: Duration = Duration::from_secs(90);

fn deployment(name: &str, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    }))
    .unwrap()
}

/// The running pods of the namespace labelled `app=NAME`.
async fn running(pods: &Api<Pod>, app: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|pod| {
            pod.metadata.deletion_timestamp.is_none()
                && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .collect()
}

/// The first running pod of `app` on `node`, `log` (ocifit's) shown if none comes in time.
async fn wait_running_on(pods: &Api<Pod>, app: &str, node: &str, log: impl Fn() -> String) -> Pod {
    let start = Instant::now();
    loop {
        let now = running(pods, app).await;
        if let Some(pod) = now
            .iter()
            .find(|pod| node_name(pod).as_deref() == Some(node))
        {
            return pod.clone();
        }
        if start.elapsed() > PASSES {
            let all = pods.list(&ListParams::default()).await.unwrap();
            let seen: Vec<_> = all
                .items
                .iter()
                .map(|pod| {
                    (
                        pod.name_any(),
                        node_name(pod),
                        pod.status.as_ref().and_then(|s| s.phase.clone()),
                    )
                })
                .collect();
            panic!(
                "no {app} pod runs on {node}: {seen:?}\nocifit's log:\n{}",
                log()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_misplaced_deployment_pod_is_evicted_once_and_placed_a_bare_or_protected_one_only_reported()
 {
    let env = Env::start_scheduling(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    env.add_node(linux_node("amd-1")).await;
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    let arm = env
        .registry()
        .push_image("misplaced/app", "v1", "linux/arm64")
        .await
        .unwrap()
        .reference;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    for name in ["web", "guarded"] {
        deployments
            .create(&PostParams::default(), &deployment(name, &arm))
            .await
            .unwrap();
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();
    let mut lonely = placement::pod(
        "lonely",
        NAMESPACE,
        json!({"app": "lonely"}),
        &[("app", &arm)],
    );
    lonely.spec.as_mut().unwrap().node_name = Some("amd-1".into());
    pods.create(&PostParams::default(), &lonely).await.unwrap();
    // Before any policy, and with amd64 the only node: all three run where they cannot.
    let web = wait_running_on(&pods, "web", "amd-1", String::new).await;
    let guarded = wait_running_on(&pods, "guarded", "amd-1", String::new).await;
    wait_running_on(&pods, "lonely", "amd-1", String::new).await;
    env.add_node(linux_node("arm-1").label("kubernetes.io/arch", "arm64"))
        .await;

    let served = placement::serve(
        &env,
        "placement-evict",
        &["--placement-audit-interval", "10s"],
    )
    .await;
    // Evict only once the gate is in place, so the replacement is gated.
    create_policy(&client, "evicting", json!({})).await;
    served
        .gate(&client, "ocifit-placement", NAMESPACE, &arm)
        .await;
    Api::<PlacementPolicy>::all(client.clone())
        .patch(
            "evicting",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"misplaced": "Evict"}})),
        )
        .await
        .unwrap();

    let replacement = wait_running_on(&pods, "web", "arm-1", || served.controller.log_text()).await;
    assert_ne!(replacement.uid(), web.uid());
    assert_eq!(
        annotation(&replacement, "placement.ocifit.io/outcome"),
        "Constrained",
        "the replacement was gated and placed"
    );
    let note = wait_event(
        &client,
        NAMESPACE,
        "Pod",
        &web.name_any(),
        "EvictedMisplaced",
    )
    .await;
    assert!(note.contains("node amd-1 is linux/amd64"), "{note}");
    for name in ["lonely", &guarded.name_any()] {
        let note = wait_event(&client, NAMESPACE, "Pod", name, "Misplaced").await;
        assert!(note.contains("placement policy evicting"), "{note}");
    }
    // Another pass and more: the protected and the bare pod still run where they are, and
    // only the Deployment's pod was ever evicted.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let still = pods.get(&guarded.name_any()).await.unwrap();
    assert_eq!(
        still.uid(),
        guarded.uid(),
        "the PodDisruptionBudget was respected"
    );
    assert!(still.metadata.deletion_timestamp.is_none());
    assert!(
        pods.get("lonely")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    let evicted: Vec<_> = events(&client, NAMESPACE, "Pod", &guarded.name_any())
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "EvictedMisplaced")
        .collect();
    assert!(evicted.is_empty(), "{evicted:?}");
    assert_eq!(
        served
            .controller
            .metric("ocifit_misplaced_evictions_total")
            .await,
        1.0
    );
    assert_eq!(
        served
            .controller
            .metric("ocifit_misplaced_pods_total")
            .await,
        3.0
    );
    let status = Api::<PlacementPolicy>::all(client.clone())
        .get_status("evicting")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.pods.misplaced, 3, "web's first pod, lonely, guarded");
}
