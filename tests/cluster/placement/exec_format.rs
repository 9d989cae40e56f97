//! A pod placement let through onto the wrong platform is reported: on the real node (this
//! machine's architecture), a ReplicaSet's pod whose only image is built for the other
//! architecture (its entrypoint a real program of it), asking for this machine's architecture
//! itself, under a policy that releases pods whose containers share no platform with what they
//! ask (`onNoCommonPlatform: Release`, a fail-open path). Its container fails with `exec format
//! error`; within 30 s of that first failure the pod and its ReplicaSet have an
//! `ExecFormatError` Event naming the image, the node's platform and what ocifit knew of the
//! image, the policy's status counts it, and so does `ocifit_exec_format_errors_total`.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use ocifit_testkit::image::{foreign_architecture, foreign_image, machine_architecture};
use serde_json::json;

use crate::support::placement::{
    self, annotation, create_policy, create_replica_set, first_failure, wait_event,
    wait_policy_count,
};

const NAMESPACE: &str = "wrong-cpu";
const NODE: &str = "real-1";

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

    let owner = create_replica_set(
        &client,
        NAMESPACE,
        "foreign",
        json!({
            "nodeSelector": {"kubernetes.io/arch": machine_architecture()},
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": image}]
        }),
    )
    .await;
    let failed = first_failure(&client, NAMESPACE, "foreign").await;
    let pod: &Pod = &failed.pod;
    assert!(
        failed.message.contains("exec format error"),
        "the gate's FallbackToLogsOnError brings the log's line into the status: {:?}",
        failed.message
    );
    assert_eq!(
        annotation(pod, "placement.ocifit.io/outcome"),
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
    wait_policy_count(&client, "lenient", "execFormatErrors", |pods| {
        pods.exec_format_errors
    })
    .await;
    assert!(
        served
            .controller
            .metric("ocifit_exec_format_errors_total")
            .await
            >= 1.0
    );
}
