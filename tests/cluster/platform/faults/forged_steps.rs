//! Forged step pods: the step label, ocifit's marker annotation and a terminated `ocifit-prepare`
//! status written by hand, in pods with long names naming a long cache name, are what any pod
//! author can make. 100 of them, created and given a finished helper's report through the real
//! apiserver while `ocifit run` leads, add no step series and leave the scrape's size as it was;
//! a step of a cache in the store, counted before and after them, shows the watch saw them.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use ocifit::api::ArtifactCache;
use ocifit::api::step::{INJECTED, STEP_LABEL, STEP_LABEL_VALUE};
use ocifit::step_helper::{Direction, Report};
use serde_json::json;

use crate::support::{Controller, Env, get};

const NAMESPACE: &str = "forged";
const HELPER: &str = "ghcr.io/ocifit/ocifit:forged-test";
const FORGED: usize = 100;
/// The real cache's endpoint (not deployed: `spec.endpoint` is its status's).
const ENDPOINT: &str = "registry.example.com";
/// The step series of the real cache.
const COUNTED: &str =
    "ocifit_artifact_steps_total{cache=\"forged/real\",direction=\"pull\",outcome=\"ok\"}";
/// How long the leader may take to count the real step (a wait, not a measure).
const COUNTED_WITHIN: Duration = Duration::from_secs(120);

fn step_pod(name: &str, marker: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE,
            "labels": {STEP_LABEL: STEP_LABEL_VALUE},
            "annotations": {INJECTED: marker}},
        "spec": {
            "schedulingGates": [{"name": "example.com/hold"}],
            "initContainers": [{"name": "ocifit-prepare", "image": HELPER}],
            "containers": [{"name": "step", "image": "busybox"}],
        },
    }))
    .expect("a pod")
}

/// Writes a finished `ocifit-prepare` run of container `id` into `name`'s status, by hand.
async fn finish(pods: &Api<Pod>, name: &str, id: &str) {
    let mut report = Report::new(Direction::Pull);
    report.moved([1_000_000_000_000], Duration::from_millis(250));
    let status = json!({"status": {"initContainerStatuses": [{
        "name": "ocifit-prepare", "image": HELPER, "imageID": "", "ready": false,
        "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "containerID": id, "message": report.message()}},
    }]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("a status written by hand");
}

async fn scrape(controller: &Controller) -> String {
    get(&controller.admin, "/metrics")
        .await
        .expect("a scrape")
        .1
}

fn step_series(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|line| line.starts_with("ocifit_artifact_step"))
        .filter_map(|line| line.rsplit_once(' ').map(|(series, _)| series))
        .collect()
}

async fn counted(controller: &Controller, runs: f64) {
    let start = Instant::now();
    while controller.metric(COUNTED).await < runs {
        assert!(
            start.elapsed() < COUNTED_WITHIN,
            "the real step not counted {runs} times; log:\n{}",
            controller.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn real_cache(client: &Client) {
    let cache: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "real", "namespace": NAMESPACE},
        "spec": {"deploy": false, "endpoint": ENDPOINT},
    }))
    .expect("a cache");
    let caches = Api::<ArtifactCache>::namespaced(client.clone(), NAMESPACE);
    caches
        .create(&PostParams::default(), &cache)
        .await
        .expect("the cache");
    let start = Instant::now();
    while caches
        .get("real")
        .await
        .ok()
        .and_then(|c| c.status)
        .and_then(|s| s.endpoint)
        .is_none()
    {
        assert!(
            start.elapsed() < COUNTED_WITHIN,
            "the cache has no endpoint"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn forged_step_pods_with_long_names_add_no_series_and_leave_the_scrape_as_it_was() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    let helper = format!("--artifact-helper-image={HELPER}");
    let controller = Controller::start(&env, "forged-steps", &[&helper]).await;
    real_cache(&client).await;
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let real = step_pod("real-step", &format!("ArtifactCache real at {ENDPOINT}"));
    pods.create(&PostParams::default(), &real)
        .await
        .expect("the real step");
    finish(&pods, "real-step", "containerd://real-1").await;
    counted(&controller, 1.0).await;
    let before = scrape(&controller).await;

    let long_cache = "c".repeat(250);
    for index in 0..FORGED {
        let name = format!("{}-{index}", "p".repeat(240));
        let marker = format!("ArtifactCache {long_cache}-{index} at {ENDPOINT}");
        pods.create(&PostParams::default(), &step_pod(&name, &marker))
            .await
            .expect("a forged pod");
        finish(
            &pods,
            &name,
            &format!("containerd://{}-{index}", "f".repeat(200)),
        )
        .await;
    }
    // The watch delivers one stream in order: once the real step's second run is counted, every
    // forged status before it was seen.
    finish(&pods, "real-step", "containerd://real-2").await;
    counted(&controller, 2.0).await;
    let after = scrape(&controller).await;

    let (series_before, series_after) = (step_series(&before), step_series(&after));
    eprintln!(
        "FAULT forged-steps: {FORGED} forged step pods (names of {} bytes, a cache name of {} bytes): \
         step series {} before, {} after; scrape {} bytes before, {} bytes after",
        240 + 4,
        long_cache.len(),
        series_before.len(),
        series_after.len(),
        before.len(),
        after.len()
    );
    assert_eq!(series_after, series_before, "no series added");
    assert!(!after.contains(&long_cache), "no forged name in the scrape");
    assert!(
        after.len().abs_diff(before.len()) < 1024,
        "the scrape grew from {} to {} bytes",
        before.len(),
        after.len()
    );
}
