//! Each fail-open path of placement, on the real node (this machine's architecture), with an image
//! built only for the other architecture (its entrypoint a real program of it), in one cluster:
//! the container fails with `exec format error`, and within 30 s of that first failure the pod and
//! its ReplicaSet have a Warning Event, the policy's status counts it, and so does a metric.
//!
//! 1. **Policy created after the pod**: never gated, so its container keeps
//!    `terminationMessagePolicy: File` and its status never names the error; the controller's
//!    running-pod audit (`--placement-audit-interval 10s`) reports it `Misplaced`
//!    (`ocifit_misplaced_pods_total`, `status.pods.misplaced`), and the chart's
//!    `OcifitMisplacedPods` alert fires in a real Prometheus.
//! 2. **An `IfNotPresent` tag moved within the tag cache's time**: ocifit inspected the tag while it
//!    was a multi-platform index (for a pod no node can take, so no node pulled it); the tag then
//!    names the foreign-only image; the next pod is placed from the cache onto this node, pulls the
//!    moved tag and fails: `ExecFormatError` naming the digest inspected and the one the node ran,
//!    `ocifit_exec_format_errors_total`, and the chart's `OcifitExecFormatErrors` alert fires in a
//!    real Prometheus. The image's cached tag is dropped: the pod after is placed from a fresh
//!    inspection (constrained to the foreign platform only).
//! 3. **`onInspectionFailure: ReleaseUnconstrained` with the registry down**: the registry is
//!    frozen before the pod is created; ocifit cannot inspect and releases it unconstrained; the
//!    node still has the image from path 1 (`IfNotPresent`), runs it and fails: `ExecFormatError`
//!    saying ocifit had not inspected the image.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use ocifit_testkit::image::{foreign_architecture, foreign_image, machine_architecture};
use ocifit_testkit::{Cluster, RealNode, create_namespace};
use serde_json::{Value, json};

use crate::support::Env;
use crate::support::placement::{
    self, Served, WAIT, annotation, create_policy, create_replica_set, first_failure, gates,
    wait_event, wait_pod, wait_policy_count,
};
use crate::support::prometheus::{Prometheus, chart_documents, chart_rules};

const NODE: &str = "real-1";
const LATE: &str = "late-policy";
const MOVED: &str = "moved-tag";
const DOWN: &str = "registry-down";
/// The Done-when's bound between a container's first failure and its report.
const REPORTED_WITHIN: Duration = Duration::from_secs(30);
const OUTCOME: &str = "placement.ocifit.io/outcome";
const PLATFORMS: &str = "placement.ocifit.io/platforms";

/// One real-node cluster with ocifit auditing every 10 s, scraped by a real Prometheus.
struct Setup {
    env: Env,
    served: Served,
    prometheus: Prometheus,
    /// The foreign-only image, `foreign/app:v1`.
    foreign: String,
    /// The same by digest, as the node ran it.
    foreign_by_digest: String,
    /// A foreign-only image no test pod runs, for the gates' probes.
    probe: String,
}

#[tokio::test]
async fn each_fail_open_path_is_reported_within_30_s_of_the_containers_first_failure() {
    let setup = set_up().await;
    policy_created_after_the_pod(&setup).await;
    tag_moved_within_the_cache_time(&setup).await;
    registry_down_and_released_unconstrained(&setup).await;
}

async fn set_up() -> Setup {
    let env = Env::start_with(
        crate::support::ocifit_binary(),
        Cluster::builder()
            .with_all_controllers()
            .real_node(RealNode::new(NODE)),
    )
    .await;
    for namespace in [LATE, MOVED, DOWN] {
        create_namespace(&env.client, namespace)
            .await
            .expect("the namespace");
    }
    let registry = env.registry();
    let pushed = registry
        .push_built(&foreign_image(), "foreign/app", "v1")
        .await
        .expect("the foreign image pushed");
    let probe = registry
        .push_image("probe/app", "v1", &linux(foreign_architecture()))
        .await
        .expect("the probe image pushed")
        .reference;
    let served = placement::serve(
        &env,
        "placement-fail-open",
        &["--placement-audit-interval", "10s"],
    )
    .await;
    let rules = chart_rules(&chart_documents().await, &[], "");
    let prometheus = Prometheus::start(&env, &served.controller.admin, &rules).await;
    prometheus
        .wait_for("ocifit scraped before any failure", |p| async move {
            p.series("ocifit_exec_format_errors_total + ocifit_misplaced_pods_total == 0")
                .await
                > 0
        })
        .await;
    Setup {
        env,
        served,
        prometheus,
        foreign: pushed.reference.clone(),
        foreign_by_digest: pushed.by_digest(),
        probe,
    }
}

/// Path 1: the pod exists before any policy selects it.
async fn policy_created_after_the_pod(s: &Setup) {
    let client = &s.env.client;
    let owner = create_replica_set(client, LATE, "late", runs(&s.foreign)).await;
    wait_created(client, LATE, "late").await;
    create_policy(client, "late", in_namespace(LATE, json!({}))).await;
    let failed = first_failure(client, LATE, "late").await;
    let pod = failed.pod.name_any();
    assert_eq!(
        annotation(&failed.pod, OUTCOME),
        "",
        "never gated: no policy selected it when it was created"
    );

    let note = wait_event(client, LATE, "Pod", &pod, "Misplaced").await;
    for part in [
        "placement policy late selects this running pod".to_owned(),
        format!("node {NODE} is {}", linux(machine_architecture())),
        format!(
            "images (app: {}) run on {}",
            s.foreign_by_digest,
            linux(foreign_architecture())
        ),
    ] {
        assert!(
            note.contains(&part),
            "{part:?} not in the pod's Event: {note}"
        );
    }
    owner_told(client, LATE, &owner, &pod, "Misplaced").await;
    wait_policy_count(client, "late", "misplaced", |pods| pods.misplaced).await;
    let counted = s
        .served
        .controller
        .metric("ocifit_misplaced_pods_total")
        .await;
    assert!(counted >= 1.0, "ocifit_misplaced_pods_total {counted}");
    reported_in_time("policy-created-after-the-pod", failed.at);
    alert_fires(s, "OcifitMisplacedPods", failed.at).await;
}

/// Path 2: the tag names another image than the one inspected.
async fn tag_moved_within_the_cache_time(s: &Setup) {
    let client = &s.env.client;
    let registry = s.env.registry();
    create_policy(client, "moved", in_namespace(MOVED, json!({}))).await;
    s.served
        .gate(client, "ocifit-placement-moved", MOVED, &s.probe)
        .await;
    let both = [machine_architecture(), foreign_architecture()].map(linux);
    let index = registry
        .push_multi_platform("moved/app", "v1", &both.each_ref().map(String::as_str))
        .await
        .expect("the multi-platform index pushed");
    let pods: Api<Pod> = Api::namespaced(client.clone(), MOVED);
    let first = parked(&pods, "first", &index.reference).await;
    for platform in &both {
        assert!(
            annotation(&first, PLATFORMS).contains(platform.as_str()),
            "inspected while it named the index: {:?}",
            annotation(&first, PLATFORMS)
        );
    }

    let moved = registry
        .push_built(&foreign_image(), "moved/app", "v1")
        .await
        .expect("the tag moved to the foreign image");
    let owner = create_replica_set(client, MOVED, "moved", runs(&index.reference)).await;
    let failed = first_failure(client, MOVED, "moved").await;
    let pod = failed.pod.name_any();
    assert!(
        failed.message.contains("exec format error"),
        "{:?}",
        failed.message
    );
    assert_eq!(
        annotation(&failed.pod, OUTCOME),
        "Constrained",
        "placed from the cache"
    );

    let note = wait_event(client, MOVED, "Pod", &pod, "ExecFormatError").await;
    for part in [
        format!(
            "container app (image {}) failed with exec format error",
            index.reference
        ),
        format!("on node {NODE} ({})", linux(machine_architecture())),
        format!("ocifit inspected {}", index.digest),
        "the node ran another digest: the tag moved since".to_owned(),
        format!("the node ran {}", moved.digest),
    ] {
        assert!(
            note.contains(&part),
            "{part:?} not in the pod's Event: {note}"
        );
    }
    owner_told(client, MOVED, &owner, &pod, "ExecFormatError").await;
    wait_policy_count(client, "moved", "execFormatErrors", |pods| {
        pods.exec_format_errors
    })
    .await;
    exec_format_errors_counted(s, 1.0).await;
    reported_in_time("tag-moved-within-the-cache-time", failed.at);
    alert_fires(s, "OcifitExecFormatErrors", failed.at).await;

    let next = parked(&pods, "next", &index.reference).await;
    assert_eq!(
        annotation(&next, PLATFORMS),
        linux(foreign_architecture()),
        "the pod after the failure is placed from a fresh inspection of the moved tag"
    );
    // Its restarts would count on into the next path's metric.
    Api::<ReplicaSet>::namespaced(client.clone(), MOVED)
        .delete(&owner, &DeleteParams::foreground())
        .await
        .expect("the ReplicaSet deleted");
    wait_gone(client, MOVED, "moved").await;
}

/// Path 3: the registry stops answering before the pod is created.
async fn registry_down_and_released_unconstrained(s: &Setup) {
    let client = &s.env.client;
    create_policy(
        client,
        "down",
        in_namespace(
            DOWN,
            json!({"onInspectionFailure": {"attempts": 1, "timeout": "1s"}}),
        ),
    )
    .await;
    s.served
        .gate(client, "ocifit-placement-down", DOWN, &s.probe)
        .await;
    let before = s
        .served
        .controller
        .metric("ocifit_exec_format_errors_total")
        .await;
    s.env.registry().pause().expect("the registry frozen");
    let owner = create_replica_set(client, DOWN, "down", runs(&s.foreign)).await;
    let failed = first_failure(client, DOWN, "down").await;
    let pod = failed.pod.name_any();
    assert!(
        failed.message.contains("exec format error"),
        "{:?}",
        failed.message
    );
    assert_eq!(annotation(&failed.pod, OUTCOME), "Unconstrained");

    let note = wait_event(client, DOWN, "Pod", &pod, "ExecFormatError").await;
    for part in [
        format!(
            "container app (image {}) failed with exec format error",
            s.foreign
        ),
        format!("on node {NODE} ({})", linux(machine_architecture())),
        "ocifit released the pod Unconstrained".to_owned(),
        "ocifit had not inspected this image".to_owned(),
    ] {
        assert!(
            note.contains(&part),
            "{part:?} not in the pod's Event: {note}"
        );
    }
    owner_told(client, DOWN, &owner, &pod, "ExecFormatError").await;
    wait_policy_count(client, "down", "execFormatErrors", |pods| {
        pods.exec_format_errors
    })
    .await;
    exec_format_errors_counted(s, before + 1.0).await;
    reported_in_time("registry-down-released-unconstrained", failed.at);
    s.env.registry().resume().expect("the registry thawed");
}

/// The owner's Event `reason`, naming the pod.
async fn owner_told(client: &Client, namespace: &str, owner: &str, pod: &str, reason: &str) {
    let note = wait_event(client, namespace, "ReplicaSet", owner, reason).await;
    assert!(note.starts_with(&format!("pod {pod}: ")), "{note}");
}

async fn exec_format_errors_counted(s: &Setup, at_least: f64) {
    let counted = s
        .served
        .controller
        .metric("ocifit_exec_format_errors_total")
        .await;
    assert!(
        counted >= at_least,
        "ocifit_exec_format_errors_total {counted}"
    );
}

/// Everything was reported within [`REPORTED_WITHIN`] of the first failure `failed`.
fn reported_in_time(path: &str, failed: Instant) {
    let delay = failed.elapsed();
    eprintln!("MEASURE {path} reported {delay:?} after the container's first failure");
    assert!(
        delay <= REPORTED_WITHIN,
        "{path}: reported {delay:?} after the first failure, more than {REPORTED_WITHIN:?}"
    );
}

/// The chart's alert `name` fires, with the labels its runbook section names.
async fn alert_fires(s: &Setup, name: &str, failed: Instant) {
    let fired = s
        .prometheus
        .wait_for(&format!("{name} firing"), |p| async move {
            p.fired(name).await.is_some()
        })
        .await;
    eprintln!(
        "MEASURE {name} firing {:?} after the container's first failure",
        fired.saturating_duration_since(failed)
    );
    let alert = s.prometheus.fired(name).await.expect("the alert");
    assert_eq!(
        (alert.label("severity"), alert.label("job")),
        ("warning", "ocifit-metrics"),
        "{alert:?}"
    );
}

/// A pod of `image` no node can take (so none pulls it), once ocifit placed it.
async fn parked(pods: &Api<Pod>, name: &str, image: &str) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "nowhere"},
            "containers": [{"name": "app", "image": image}]
        }
    }))
    .expect("a pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod created");
    wait_pod(pods, name, "placed", |pod| {
        gates(pod).is_empty() && !annotation(pod, PLATFORMS).is_empty()
    })
    .await
}

/// Waits until the pods labelled `app: APP` in `namespace` number `wanted(count)`.
async fn wait_pods(
    client: &Client,
    namespace: &str,
    app: &str,
    what: &str,
    wanted: fn(usize) -> bool,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let start = Instant::now();
    loop {
        let listed = pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .expect("pods");
        if wanted(listed.items.len()) {
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "pods of {app}: not {what} within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_created(client: &Client, namespace: &str, app: &str) {
    wait_pods(client, namespace, app, "created", |count| count > 0).await;
}

async fn wait_gone(client: &Client, namespace: &str, app: &str) {
    wait_pods(client, namespace, app, "gone", |count| count == 0).await;
}

/// A pod spec running `image`.
fn runs(image: &str) -> Value {
    json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": image}]
    })
}

/// A policy spec selecting `namespace`, with the rest of `spec`.
fn in_namespace(namespace: &str, mut spec: Value) -> Value {
    spec["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}});
    spec
}

fn linux(architecture: &str) -> String {
    format!("linux/{architecture}")
}
