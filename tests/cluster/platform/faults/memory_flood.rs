//! The memory flood: anyone who can create pods can set placement's tracking label, and every
//! replica watches the pods that carry it. 1,000 such pods, each with 512 KiB of `args` (500 MiB
//! through the real apiserver), are created while `ocifit run` watches; a second replica then
//! starts with all of them present (its first list). Both stay under the chart's memory limit,
//! and the pods ocifit gated among them are released with their `args` and `env` intact.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use ocifit::api::PlacementPolicy;
use ocifit::api::placement_pod::{OUTCOME_ANNOTATION, POLICY_LABEL, SCHEDULING_GATE};
use serde_json::json;
use tokio::task::JoinSet;

use super::{CHART_LIMIT_KIB, rss_kib, second_replica};
use crate::support::placement::{annotation, create_policy, gates};
use crate::support::{Controller, Env};

const NAMESPACE: &str = "flood";
const PODS: usize = 1_000;
/// Pods carrying ocifit's own gate (the rest carry their author's): the controller releases them.
const GATED: usize = 10;
const ARGS_BYTES: usize = 512 * 1024;
/// Creations in flight at once.
const CREATORS: usize = 8;
/// The gauge of the pods placement's watch holds (labelled, not released by ocifit).
const HELD_SERIES: &str = "ocifit_store_objects{store=\"placement_pods\"}";
/// How long the leader may take to hold every pod (a wait, not a measure).
const COUNTED_WITHIN: Duration = Duration::from_secs(600);
/// How long the second replica may take to list them (a wait, not a measure).
const READY_WITHIN: Duration = Duration::from_secs(300);

fn flood_pod(index: usize, image: &str, args: &str) -> Pod {
    let gate = if index < GATED {
        SCHEDULING_GATE
    } else {
        "example.com/hold"
    };
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("flood-{index}"), "namespace": NAMESPACE,
            "labels": {POLICY_LABEL: "flood"}},
        "spec": {
            "schedulingGates": [{"name": gate}],
            "containers": [{"name": "app", "image": image, "args": [args],
                "env": [{"name": "MODE", "value": "flood"}]}],
        },
    }))
    .expect("a pod")
}

async fn released_count(client: &Client) -> i32 {
    Api::<PlacementPolicy>::all(client.clone())
        .get("flood")
        .await
        .expect("the policy")
        .status
        .map_or(0, |status| status.pods.released)
}

#[tokio::test]
async fn a_flood_of_labelled_pods_with_huge_args_keeps_every_replica_under_the_chart_limit() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    let image = env
        .registry()
        .push_multi_platform("flood/app", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .expect("the image")
        .reference;
    create_policy(&client, "flood", json!({})).await;
    let leader = Controller::start(&env, "memory-flood-a", &[]).await;
    let (rss_idle, _) = rss_kib(leader.pid());

    let args: Arc<str> = "x".repeat(ARGS_BYTES).into();
    let created = Instant::now();
    let mut creators = JoinSet::new();
    for first in 0..CREATORS {
        let (pods, image, args) = (
            Api::<Pod>::namespaced(client.clone(), NAMESPACE),
            image.clone(),
            Arc::clone(&args),
        );
        creators.spawn(async move {
            for index in (first..PODS).step_by(CREATORS) {
                pods.create(&PostParams::default(), &flood_pod(index, &image, &args))
                    .await
                    .expect("a flood pod created");
            }
        });
    }
    creators.join_all().await;
    let took = created.elapsed();
    // Every pod held (the foreign-gated ones stay in the watch: ocifit never releases them) and
    // ocifit's own released.
    let start = Instant::now();
    loop {
        let (held, released) = (
            leader.metric(HELD_SERIES).await,
            released_count(&client).await,
        );
        if held >= (PODS - GATED) as f64 && released >= GATED as i32 {
            break;
        }
        assert!(
            start.elapsed() < COUNTED_WITHIN,
            "the leader holds {held} of {PODS} pods and released {released} of {GATED}; log:\n{}",
            leader.log_text()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (rss, peak) = rss_kib(leader.pid());
    eprintln!(
        "FAULT memory-flood: {PODS} labelled pods of {} KiB args ({} MiB) created in {took:?}; \
         watching replica RSS {} MiB before, {} MiB after, peak {} MiB (limit {} MiB)",
        ARGS_BYTES / 1024,
        PODS * ARGS_BYTES / (1024 * 1024),
        rss_idle / 1024,
        rss / 1024,
        peak / 1024,
        CHART_LIMIT_KIB / 1024
    );

    // Ready once its stores hold a first list: every labelled pod read.
    let (starting, ready) = second_replica(&env, "memory-flood-b", READY_WITHIN).await;
    let (second_rss, second_peak) = rss_kib(starting.pid());
    eprintln!(
        "FAULT memory-flood: a replica starting with them present: ready in {ready:?}, RSS {} MiB, \
         peak {} MiB (limit {} MiB)",
        second_rss / 1024,
        second_peak / 1024,
        CHART_LIMIT_KIB / 1024
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for index in 0..GATED {
        let pod = pods.get(&format!("flood-{index}")).await.expect("the pod");
        assert_eq!(gates(&pod), Vec::<String>::new(), "flood-{index} released");
        assert_eq!(annotation(&pod, OUTCOME_ANNOTATION), "Constrained");
        let container = &pod.spec.as_ref().expect("a spec").containers[0];
        let kept = container.args.as_deref().unwrap_or_default();
        assert!(
            kept.len() == 1 && kept[0].len() == ARGS_BYTES,
            "flood-{index} keeps its args"
        );
        let env = container.env.as_deref().unwrap_or_default();
        assert_eq!(
            env.first().and_then(|var| var.value.as_deref()),
            Some("flood"),
            "flood-{index} keeps its env"
        );
    }
    assert!(
        peak < CHART_LIMIT_KIB,
        "the watching replica peaked at {peak} KiB, over the chart's limit"
    );
    assert!(
        second_peak < CHART_LIMIT_KIB,
        "the starting replica peaked at {second_peak} KiB, over the chart's limit"
    );
}
