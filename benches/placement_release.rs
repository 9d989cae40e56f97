//! Platform placement's latency and throughput on a real apiserver and registry, `ocifit run`
//! being the binary this bench builds (the bench profile's optimisations): pod created (the
//! create request sent) → ocifit's gate gone (seen by a watch), cold (each pod's image never
//! inspected before: a tag lookup and a manifest read) and warm (images already inspected),
//! one pod at a time, p50 and p99; then pods per second released when many are created at
//! once (16 creations in flight, as a ReplicaSet controller sends them). No kube-scheduler: the
//! figures are placement's alone. `cargo bench --bench placement_release`; without `--bench`
//! (`cargo test --benches`) a few pods check that the path works and nothing is measured.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hdrhistogram::Histogram;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use ocifit::api::placement_pod::{POLICY_LABEL, SCHEDULING_GATE};
use ocifit_cluster_tests::Env;
use ocifit_cluster_tests::placement::{self, create_policy};
use serde_json::json;
use tokio::sync::Notify;

const NAMESPACE: &str = "bench";

/// When each pod was first seen without ocifit's gate.
#[derive(Clone, Default)]
struct Released {
    at: Arc<Mutex<HashMap<String, Instant>>>,
    changed: Arc<Notify>,
}

impl Released {
    /// Watches the namespace's gated pods until the process ends.
    fn watch(&self, pods: Api<Pod>) {
        let released = self.clone();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(
                watcher(pods, watcher::Config::default().labels(POLICY_LABEL)).default_backoff()
            );
            // Errors are retried with backoff (the last ones come as the cluster stops).
            while let Some(event) = events.next().await {
                let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event else {
                    continue;
                };
                let gated = placement::gates(&pod).iter().any(|g| g == SCHEDULING_GATE);
                if !gated {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let mut at = released.at.lock().expect("not poisoned");
                    at.entry(name).or_insert_with(Instant::now);
                    released.changed.notify_waiters();
                }
            }
        });
    }

    async fn wait(&self, names: &[String]) -> Vec<Instant> {
        loop {
            let notified = self.changed.notified();
            {
                let at = self.at.lock().expect("not poisoned");
                if let Some(found) = names
                    .iter()
                    .map(|n| at.get(n).copied())
                    .collect::<Option<Vec<_>>>()
                {
                    return found;
                }
            }
            tokio::time::timeout(Duration::from_secs(60), notified)
                .await
                .expect("pods released within a minute");
        }
    }
}

async fn create(pods: &Api<Pod>, name: &str, image: &str) -> Instant {
    let pod = placement::pod(name, NAMESPACE, json!({}), &[("app", image)]);
    let sent = Instant::now();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    sent
}

/// One pod at a time, each image from `images` in turn: created → released, in microseconds.
async fn one_at_a_time(
    pods: &Api<Pod>,
    released: &Released,
    prefix: &str,
    images: &[String],
    count: usize,
) -> Histogram<u64> {
    // Bounded (1 µs to a minute): saturating_record clamps to the bounds, it never grows them.
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("a histogram");
    for i in 0..count {
        let name = format!("{prefix}-{i}");
        let sent = create(pods, &name, &images[i % images.len()]).await;
        let at = released.wait(std::slice::from_ref(&name)).await[0];
        latencies.saturating_record(
            u64::try_from(at.duration_since(sent).as_micros()).unwrap_or(u64::MAX),
        );
    }
    latencies
}

fn report(what: &str, h: &Histogram<u64>) {
    println!(
        "  {what:<34} {:>5} pods  p50 {:>7.1} ms  p99 {:>7.1} ms  max {:>7.1} ms",
        h.len(),
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.max() as f64 / 1000.0
    );
}

#[tokio::main]
async fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (cold, warm, burst) = if bench { (50, 300, 500) } else { (2, 2, 4) };
    let env = Env::start(env!("CARGO_BIN_EXE_ocifit")).await;
    let client = env.client.clone();
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    let registry = env.registry();
    let mut fresh = Vec::new();
    for i in 0..cold {
        fresh.push(
            registry
                .push_multi_platform(
                    &format!("bench/cold{i}"),
                    "v1",
                    &["linux/amd64", "linux/arm64"],
                )
                .await
                .expect("pushed")
                .reference,
        );
    }
    let served = placement::serve(&env, "placement-bench", &[]).await;
    create_policy(&client, "all", json!({})).await;
    served
        .gate(&client, "ocifit-placement", NAMESPACE, &fresh[0])
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let released = Released::default();
    released.watch(pods.clone());

    let cold_latencies = one_at_a_time(&pods, &released, "cold", &fresh, cold).await;
    // Ten images, all inspected above: every lookup answered from memory.
    let cached = &fresh[..fresh.len().min(10)];
    let warm_latencies = one_at_a_time(&pods, &released, "warm", cached, warm).await;

    let start = Instant::now();
    let mut creating = tokio::task::JoinSet::new();
    let names: Vec<String> = (0..burst).map(|i| format!("burst-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        if creating.len() == 16 {
            creating
                .join_next()
                .await
                .expect("a task")
                .expect("created");
        }
        let (pods, name, image) = (pods.clone(), name.clone(), cached[i % cached.len()].clone());
        creating.spawn(async move {
            create(&pods, &name, &image).await;
        });
    }
    creating.join_all().await;
    let created = start.elapsed();
    let last = released.wait(&names).await.into_iter().max().expect("pods");
    let elapsed = last.duration_since(start);
    if !bench {
        println!("placement path checked; `cargo bench --bench placement_release` measures");
        return;
    }
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "placement on a real apiserver (etcd, kube-apiserver, registry and ocifit on {cores} cores; \
         load average now {}):",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("pod created → ocifit's gate gone, one pod at a time:");
    report("cold (image never inspected)", &cold_latencies);
    report("warm (10 images, all inspected)", &warm_latencies);
    println!(
        "burst: {burst} pods created in {:.1} s (16 in flight) and all released after {:.1} s: \
         {:.0} pods/s released",
        created.as_secs_f64(),
        elapsed.as_secs_f64(),
        burst as f64 / elapsed.as_secs_f64()
    );
}
