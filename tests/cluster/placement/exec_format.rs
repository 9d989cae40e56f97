//! A pod placement let through onto the wrong platform is reported: on the real node (this
//! machine's architecture), a ReplicaSet's pod whose only image is built for the other
//! architecture (its entrypoint a real program of it), asking for this machine's architecture
//! itself, under a policy that releases pods whose containers share no platform with what they
//! ask (`onNoCommonPlatform: Release`, a fail-open path). Its container fails with `exec format
//! error`; within 30 s of that first failure the pod and its ReplicaSet have an
//! `ExecFormatError` Event naming the image, the node's platform and what ocifit knew of the
//! image, the policy's status counts it, and so does `ocifit_exec_format_errors_total`.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use ocifit::api::PlacementPolicy;
use ocifit_testkit::image::{foreign_architecture, foreign_image, machine_architecture};
use serde_json::json;

use crate::support::placement::{self, WAIT, annotation, create_policy, wait_event};

const NAMESPACE: &str = "wrong-cpu";
const NODE: &str = "real-1";
/// Long enough for the image's pull and the container's first start on the loaded machine.
const FIRST_FAILURE: Duration = Duration::from_secs(120);

#[tokio::test]
async fn a_container_failing_with_exec_format_error_is_reported_on_its_pod_owner_and_policy() {
    let (env, served, image) = placement::on_real_node(
        crate::support::ocifit_binary(),
        NODE,
        NAMESPACE,
        "placement-exec-format",
        (&foreign_image(), "foreign/app"),
    )
    .await;
    let client = env.client.clone();
    create_policy(&client, "lenient", json!({"onNoCommonPlatform": "Release"})).await;
    served
        .gate(&client, "ocifit-placement", NAMESPACE, &image)
        .await;

    let owner = create_replica_set(&client, &image).await;
    let (pod, message) = first_failure(&client).await;
    assert!(
        message.contains("exec format error"),
        "the gate's FallbackToLogsOnError brings the log's line into the status: {message:?}"
    );
    assert_eq!(
        annotation(&pod, "placement.ocifit.io/outcome"),
        "Unconstrained"
    );

    let note = wait_event(
        &client,
        NAMESPACE,
        "Pod",
        &pod.name_any(),
        "ExecFormatError",
    )
    .await;
    let this = machine_architecture();
    for part in [
        format!("container app (image {image}) failed with exec format error"),
        format!("on node {NODE} (linux/{this})"),
        "ocifit released the pod Unconstrained".to_owned(),
        format!("linux/{}", foreign_architecture()),
    ] {
        assert!(
            note.contains(&part),
            "{part:?} not in the pod's Event: {note}"
        );
    }
    let on_owner = wait_event(&client, NAMESPACE, "ReplicaSet", &owner, "ExecFormatError").await;
    assert!(
        on_owner.starts_with(&format!("pod {}: ", pod.name_any())),
        "{on_owner}"
    );
    wait_policy_count(&client, "lenient").await;
    assert!(
        served
            .controller
            .metric("ocifit_exec_format_errors_total")
            .await
            >= 1.0
    );
}

/// A ReplicaSet of one pod of `image` asking for this machine's architecture; its name.
async fn create_replica_set(client: &kube::Client, image: &str) -> String {
    let set: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "foreign", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "foreign"}},
            "template": {
                "metadata": {"labels": {"app": "foreign"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/arch": machine_architecture()},
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "app", "image": image}]
                }
            }
        }
    }))
    .expect("a ReplicaSet");
    Api::<ReplicaSet>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &set)
        .await
        .expect("the ReplicaSet created")
        .name_any()
}

/// The ReplicaSet's pod once its container has failed, and the failure's message.
async fn first_failure(client: &kube::Client) -> (Pod, String) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let start = Instant::now();
    loop {
        let listed = pods
            .list(&ListParams::default().labels("app=foreign"))
            .await
            .expect("pods");
        for pod in listed.items {
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.clone());
            let terminated = statuses.into_iter().flatten().find_map(|status| {
                let current = status.state.and_then(|state| state.terminated);
                let last = status.last_state.and_then(|state| state.terminated);
                current.or(last)
            });
            if let Some(terminated) = terminated {
                return (pod, terminated.message.unwrap_or_default());
            }
        }
        assert!(
            start.elapsed() < FIRST_FAILURE,
            "the container never failed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the policy's status counts an exec format error.
async fn wait_policy_count(client: &kube::Client, name: &str) {
    let policies: Api<PlacementPolicy> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let policy = policies.get(name).await.expect("the policy");
        let count = policy
            .status
            .map_or(0, |status| status.pods.exec_format_errors);
        if count >= 1 {
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "the policy's status.pods.execFormatErrors stayed 0"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
