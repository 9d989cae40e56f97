//! The namespace admin's memory flood: whoever may create ArtifactCaches and Deployments in a
//! namespace can make each fat (annotations near the apiserver's 256 KiB, a spec at its schema's
//! bounds; Deployments with the cache's labels and an ownerReference to their own cache), and every
//! replica watches both kinds. [`CACHES`] fat caches and [`DEPLOYMENTS`] fat Deployments are created
//! through the real apiserver while `ocifit run` leads; a second replica then starts with all of
//! them present (its first lists). Both stay under the chart's memory limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::PostParams;
use kube::{Api, Client};
use ocifit::api::ArtifactCache;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::{CHART_LIMIT_KIB, owned_by, owner_cache, rss_kib, second_replica, watch_listed};
use crate::support::{Controller, Env};

const NAMESPACE: &str = "cache-flood";
const CACHES: usize = 1_000;
const DEPLOYMENTS: usize = 200;
/// Each object's annotation (the apiserver allows 256 KiB of annotations in all).
const ANNOTATION_BYTES: usize = 200 * 1024;
/// Each Deployment's container `args`.
const ARGS_BYTES: usize = 512 * 1024;
const CREATORS: usize = 8;
/// How long a replica may take to hold every cache (a wait, not a measure).
const LISTED_WITHIN: Duration = Duration::from_secs(600);
const NOT_READY: &str = "ocifit_artifact_caches{ready=\"false\"}";

/// A cache at its schema's bounds, deploying an image off the allow-list (so ocifit deploys
/// nothing for it and says why).
fn fat_cache(index: usize, fat: &str) -> Value {
    let key = |n: usize| format!("{}/k{n}", "d".repeat(250));
    let selector: serde_json::Map<String, Value> = (0..16).map(|n| (key(n), json!("v"))).collect();
    let tolerations: Vec<Value> = (0..16)
        .map(|n| json!({"key": key(n), "operator": "Exists", "effect": "NoSchedule"}))
        .collect();
    json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": format!("fat-{index}"), "namespace": NAMESPACE,
            "annotations": {"example.com/fat": fat}},
        "spec": {"image": "example.com/not-allowed:1", "nodeSelector": selector,
            "tolerations": tolerations},
    })
}

/// A Deployment with the cache's labels and its own cache as controlling owner.
fn fat_deployment(index: usize, owner_uid: &str, fat: &str, args: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("fat-{index}"), "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": "artifact-cache",
                "app.kubernetes.io/managed-by": "ocifit"},
            "annotations": {"example.com/fat": fat},
            "ownerReferences": owned_by(owner_uid)},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": format!("fat-{index}")}},
            "template": {
                "metadata": {"labels": {"app": format!("fat-{index}")}},
                "spec": {"containers": [{"name": "c", "image": "busybox", "args": [args]}]},
            },
        },
    }))
    .expect("a deployment")
}

async fn create_all(client: &Client, owner: &str) {
    let fat: Arc<str> = "x".repeat(ANNOTATION_BYTES).into();
    let args: Arc<str> = "y".repeat(ARGS_BYTES).into();
    let mut creators = JoinSet::new();
    for first in 0..CREATORS {
        let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
        let (fat, args, owner) = (Arc::clone(&fat), Arc::clone(&args), owner.to_owned());
        creators.spawn(async move {
            for index in (first..DEPLOYMENTS).step_by(CREATORS) {
                let deployment = fat_deployment(index, &owner, &fat, &args);
                deployments
                    .create(&PostParams::default(), &deployment)
                    .await
                    .expect("a fat deployment");
            }
        });
    }
    creators.join_all().await;
    let mut creators = JoinSet::new();
    for first in 0..CREATORS {
        let caches = Api::<ArtifactCache>::namespaced(client.clone(), NAMESPACE);
        let fat = Arc::clone(&fat);
        creators.spawn(async move {
            for index in (first..CACHES).step_by(CREATORS) {
                let cache = serde_json::from_value(fat_cache(index, &fat)).expect("a cache");
                caches
                    .create(&PostParams::default(), &cache)
                    .await
                    .expect("a fat cache");
            }
        });
    }
    creators.join_all().await;
}

/// Waits until `replica` has listed its owned Deployments (its log says so) and holds every cache.
async fn holds_everything(replica: &Controller, caches: bool) {
    let start = Instant::now();
    loop {
        let log = replica.log_text();
        let listed = watch_listed(&log, "artifact cache deployments");
        let held = !caches || replica.metric(NOT_READY).await >= CACHES as f64;
        if listed && held {
            return;
        }
        assert!(
            start.elapsed() < LISTED_WITHIN,
            "the replica holds not all of them; log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn fat_caches_and_deployments_keep_every_replica_under_the_chart_limit() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    let leader = Controller::start(&env, "cache-flood-a", &[]).await;
    let (rss_idle, _) = rss_kib(leader.pid());
    let owner = owner_cache(&client, NAMESPACE).await;
    let created = Instant::now();
    create_all(&client, &owner).await;
    let took = created.elapsed();
    holds_everything(&leader, true).await;
    let (rss, peak) = rss_kib(leader.pid());
    let through =
        (CACHES * ANNOTATION_BYTES + DEPLOYMENTS * (ANNOTATION_BYTES + ARGS_BYTES)) / (1024 * 1024);
    eprintln!(
        "FAULT cache-flood: {CACHES} fat ArtifactCaches and {DEPLOYMENTS} fat Deployments ({through} MiB) \
         created in {took:?}; leading replica RSS {} MiB before, {} MiB after, peak {} MiB (limit {} MiB)",
        rss_idle / 1024,
        rss / 1024,
        peak / 1024,
        CHART_LIMIT_KIB / 1024
    );

    let (starting, ready) = second_replica(&env, "cache-flood-b", LISTED_WITHIN).await;
    let since_ready = Instant::now();
    // The follower's gauges count its store too: every replica reflects the caches.
    holds_everything(&starting, true).await;
    let listed = ready + since_ready.elapsed();
    let (second_rss, second_peak) = rss_kib(starting.pid());
    eprintln!(
        "FAULT cache-flood: a replica starting with them present: listed in {listed:?}, RSS {} MiB, \
         peak {} MiB (limit {} MiB)",
        second_rss / 1024,
        second_peak / 1024,
        CHART_LIMIT_KIB / 1024
    );
    assert!(
        peak < CHART_LIMIT_KIB,
        "the leading replica peaked at {peak} KiB, over the chart's limit"
    );
    assert!(
        second_peak < CHART_LIMIT_KIB,
        "the starting replica peaked at {second_peak} KiB, over the chart's limit"
    );
}
