//! The memory flood of the kinds the artifact cache watches beside Deployments: whoever may
//! create Services and PersistentVolumeClaims in a namespace can give them the cache's two
//! labels, an ownerReference to their own cache, and labels and annotations near the apiserver's
//! limits; every replica watches both kinds in every namespace. [`PER_NAMESPACE`] fat Services and
//! as many fat claims in each of [`NAMESPACES`] namespaces are created through the real apiserver
//! while `ocifit run` leads; a second replica then starts with all of them present (its first
//! lists). Both stay under the chart's memory limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::{CHART_LIMIT_KIB, owned_by, owner_cache, rss_kib, second_replica, watch_listed};
use crate::support::{Controller, Env};

const NAMESPACES: usize = 10;
/// Services, and as many claims, per namespace.
const PER_NAMESPACE: usize = 100;
/// Each object's annotation (the apiserver allows 256 KiB of annotations in all).
const ANNOTATION_BYTES: usize = 200 * 1024;
/// Labels of the longest value the apiserver allows (63 bytes) on each object.
const FAT_LABELS: usize = 32;
const CREATORS: usize = 8;
/// How long a replica may take to list them all (a wait, not a measure).
const LISTED_WITHIN: Duration = Duration::from_secs(600);

fn namespace(n: usize) -> String {
    format!("owned-flood-{n}")
}

/// The metadata every fat object carries: the cache's labels and many more, a fat annotation,
/// its namespace's cache as controlling owner.
fn fat_metadata(name: &str, namespace: &str, owner_uid: &str, fat: &str) -> Value {
    let mut labels: serde_json::Map<String, Value> = (0..FAT_LABELS)
        .map(|n| (format!("example.com/fat-{n}"), json!("v".repeat(63))))
        .collect();
    labels.insert("app.kubernetes.io/name".into(), json!("artifact-cache"));
    labels.insert("app.kubernetes.io/managed-by".into(), json!("ocifit"));
    json!({
        "name": name, "namespace": namespace, "labels": labels,
        "annotations": {"example.com/fat": fat},
        "ownerReferences": owned_by(owner_uid),
    })
}

async fn create_all(client: &Client, owners: &[String]) {
    let fat: Arc<str> = "x".repeat(ANNOTATION_BYTES).into();
    let mut creators = JoinSet::new();
    for first in 0..CREATORS {
        let (client, fat, owners) = (client.clone(), Arc::clone(&fat), owners.to_vec());
        creators.spawn(async move {
            for index in (first..NAMESPACES * PER_NAMESPACE).step_by(CREATORS) {
                let namespace = namespace(index % NAMESPACES);
                let owner = &owners[index % NAMESPACES];
                let name = format!("fat-{index}");
                let service: Service = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Service",
                    "metadata": fat_metadata(&name, &namespace, owner, &fat),
                    "spec": {"clusterIP": "None", "ports": [{"port": 80}]},
                }))
                .expect("a service");
                Api::<Service>::namespaced(client.clone(), &namespace)
                    .create(&PostParams::default(), &service)
                    .await
                    .expect("a fat service");
                let claim: PersistentVolumeClaim = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": fat_metadata(&name, &namespace, owner, &fat),
                    "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}},
                }))
                .expect("a claim");
                Api::<PersistentVolumeClaim>::namespaced(client.clone(), &namespace)
                    .create(&PostParams::default(), &claim)
                    .await
                    .expect("a fat claim");
            }
        });
    }
    creators.join_all().await;
}

/// Waits until `replica` has listed its owned Services and claims (its log says so).
async fn listed_both(replica: &Controller) {
    let start = Instant::now();
    loop {
        let log = replica.log_text();
        if watch_listed(&log, "artifact cache services")
            && watch_listed(&log, "artifact cache claims")
        {
            return;
        }
        assert!(
            start.elapsed() < LISTED_WITHIN,
            "the replica did not list them; log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn fat_services_and_claims_in_many_namespaces_keep_every_replica_under_the_chart_limit() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    let mut owners = Vec::new();
    for n in 0..NAMESPACES {
        ocifit_testkit::create_namespace(&client, &namespace(n))
            .await
            .expect("the namespace");
        owners.push(owner_cache(&client, &namespace(n)).await);
    }
    let leader = Controller::start(&env, "owned-flood-a", &[]).await;
    let (rss_idle, _) = rss_kib(leader.pid());
    let created = Instant::now();
    create_all(&client, &owners).await;
    let took = created.elapsed();
    let objects = 2 * NAMESPACES * PER_NAMESPACE;
    let through = objects * ANNOTATION_BYTES / (1024 * 1024);

    let (starting, ready) = second_replica(&env, "owned-flood-b", LISTED_WITHIN).await;
    let since_ready = Instant::now();
    listed_both(&starting).await;
    let listed = ready + since_ready.elapsed();
    // Read once the starting replica has listed them all: the leader's watch had every event
    // before that list was served.
    let (rss, peak) = rss_kib(leader.pid());
    let (second_rss, second_peak) = rss_kib(starting.pid());
    eprintln!(
        "FAULT owned-flood: {objects} fat Services and claims ({through} MiB) in {NAMESPACES} \
         namespaces created in {took:?}; leading replica RSS {} MiB before, {} MiB after, peak {} MiB \
         (limit {} MiB)",
        rss_idle / 1024,
        rss / 1024,
        peak / 1024,
        CHART_LIMIT_KIB / 1024
    );
    eprintln!(
        "FAULT owned-flood: a replica starting with them present: listed in {listed:?}, RSS {} MiB, \
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
