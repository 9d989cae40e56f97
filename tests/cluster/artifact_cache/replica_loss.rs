//! A cache on object storage loses a registry replica mid-transfer and nothing is lost: two
//! replicas over a real S3 store (SeaweedFS) on a real node; the registry process serving step
//! one's push of a large artifact is killed once it has received a quarter of it, and the one
//! serving step two's pull once it has sent a quarter. Both steps complete (the step helper starts
//! the upload again and asks for the rest of the download through the Service, which sends them to
//! the replica left) and the ORAS SDK reads both artifacts back byte for byte from each replica.
//! Which replica serves a transfer is read on the registry's side: the bytes its pod's network
//! namespace received or sent, read from this host (the node's processes are this host's).

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::artifact_cache::object_store::{
    large_steps, read_back_from_each, replicas, s3, start_store, store_keys,
};
use crate::artifact_cache::workflow::{
    Stage, WORKFLOW, diagnostics, eventually, job_pod, ready_cache, stage, wait_job,
    wait_step_webhook,
};

/// Large enough that a quarter of it has passed well before the end, however loaded the machine
/// (a transfer through the node's network and the S3 store ran at 2–3 MiB/s on the shared machine).
const LARGE: usize = 128 * 1024 * 1024;
/// How long a step may take: writing the file, a transfer cut and one whole one again.
const STEP_WAIT: Duration = Duration::from_secs(420);
const REGISTRY_PODS: &str = "app.kubernetes.io/instance=oras-registry";

/// A registry pod's process, as this host sees it.
struct Replica {
    pod: String,
    pid: u32,
}

/// Which way a transfer's bytes go, seen from the registry.
#[derive(Clone, Copy, Debug)]
enum Way {
    Received,
    Sent,
}

/// The registry process of each registry pod, once both pods are Ready and the containers have
/// restarted `restarts` times in all (a process killed is restarted by the kubelet).
async fn registry_processes(client: &Client, restarts: i32) -> Vec<Replica> {
    let pods = Api::<Pod>::namespaced(client.clone(), WORKFLOW);
    eventually(
        "both replicas Ready, each with its registry process",
        async || {
            let list = pods
                .list(&ListParams::default().labels(REGISTRY_PODS))
                .await
                .ok()?;
            let restarted: i32 = list
                .items
                .iter()
                .filter_map(|pod| pod.status.as_ref()?.container_statuses.as_ref())
                .flatten()
                .map(|c| c.restart_count)
                .sum();
            if restarted != restarts || replicas(client).await.len() != 2 {
                return None;
            }
            let found: Vec<Replica> = list
                .items
                .iter()
                .filter_map(|pod| {
                    let uid = pod.metadata.uid.as_deref()?;
                    Some(Replica {
                        pod: pod.metadata.name.clone()?,
                        pid: registry_pid(uid)?,
                    })
                })
                .collect();
            (found.len() == 2).then_some(found)
        },
    )
    .await
}

/// The process named `registry` in the pod with this UID (the kubelet's cgroupfs paths name it).
fn registry_pid(uid: &str) -> Option<u32> {
    let pod = format!("pod{uid}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (cgroup.contains(&pod) && comm.trim() == "registry").then_some(pid)
        })
}

/// Bytes the network namespace of `pid` received and sent on its `eth0`.
fn traffic(pid: u32, way: Way) -> Option<u64> {
    let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).ok()?;
    let counts = dev.lines().find_map(|l| l.trim().strip_prefix("eth0:"))?;
    let field = match way {
        Way::Received => 0,
        Way::Sent => 8,
    };
    counts.split_whitespace().nth(field)?.parse().ok()
}

/// Waits until one replica has moved a quarter of [`LARGE`] the `way` since now, kills its
/// registry process and says which it was and how far the transfer had come; fails when the whole
/// artifact had already passed (the kill would not have been mid-transfer).
async fn kill_mid_transfer(replicas: &[Replica], way: Way, what: &str) -> (String, u64) {
    let before: Vec<u64> = replicas
        .iter()
        .map(|r| traffic(r.pid, way).expect("the replica's traffic"))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut begun = None;
    loop {
        for (replica, before) in replicas.iter().zip(&before) {
            let moved = traffic(replica.pid, way)
                .unwrap_or(0)
                .saturating_sub(*before);
            if moved > 1 << 20 && begun.is_none() {
                begun = Some(Instant::now());
            }
            if moved >= (LARGE / 4) as u64 {
                let seconds = begun.map_or(0.0, |b| b.elapsed().as_secs_f64());
                eprintln!(
                    "{what}: {} MiB in the {seconds:.1} s since its first MiB",
                    moved >> 20
                );
                let killed = std::process::Command::new("kill")
                    .args(["-KILL", &replica.pid.to_string()])
                    .status()
                    .expect("kill runs");
                assert!(
                    killed.success(),
                    "the registry of {} is killed",
                    replica.pod
                );
                assert!(
                    moved < LARGE as u64,
                    "the whole artifact had passed before {what} was cut ({moved} B)"
                );
                return (replica.pod.clone(), moved);
            }
        }
        assert!(Instant::now() < deadline, "no replica served {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the Job `name` has finished (within [`STEP_WAIT`] of `created`) and prints what its
/// pod's containers logged; [`wait_job`] then says whether it succeeded.
async fn finished(stage: &Stage, name: &str, created: Instant) -> f64 {
    let jobs = Api::<Job>::namespaced(stage.client.clone(), WORKFLOW);
    let done = created + STEP_WAIT;
    while Instant::now() < done {
        let status = jobs.get(name).await.ok().and_then(|j| j.status);
        if status.is_some_and(|s| s.succeeded.unwrap_or(0) + s.failed.unwrap_or(0) > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let pod = job_pod(&stage.client, name).await;
    let pods = Api::<Pod>::namespaced(stage.client.clone(), WORKFLOW);
    let spec = pod.spec.clone().unwrap_or_default();
    let containers = spec
        .init_containers
        .unwrap_or_default()
        .into_iter()
        .chain(spec.containers);
    for container in containers {
        let params = LogParams {
            container: Some(container.name.clone()),
            ..LogParams::default()
        };
        let log = pods
            .logs(pod.metadata.name.as_deref().unwrap_or_default(), &params)
            .await
            .unwrap_or_else(|e| e.to_string());
        eprintln!("--- {name}'s {} ---\n{log}", container.name);
    }
    wait_job(&stage.cluster, &jobs, name, created, true).await
}

#[tokio::test]
async fn a_replica_killed_mid_push_and_one_killed_mid_pull_lose_nothing() {
    let stage = stage().await;
    let store = start_store().await;
    store_keys(&stage.client, "store-keys", store.secret_key(), &store).await;
    let spec = json!({
        "image": stage.cache_image, "replicas": 2,
        "storage": {"s3": s3("artifacts", &store.endpoint(), "store-keys")}
    });
    let ready = ready_cache(&stage, spec).await;
    let (one, two) = large_steps(&stage.step, LARGE);

    let serving = registry_processes(&stage.client, 0).await;
    wait_step_webhook(&ready.jobs, &one).await;
    let created = Instant::now();
    ready
        .jobs
        .create(&PostParams::default(), &one)
        .await
        .expect("step one is admitted");
    let (pushed_to, received) = kill_mid_transfer(&serving, Way::Received, "the push").await;
    eprintln!(
        "killed {pushed_to}'s registry after it received {received} of {LARGE} B, {:.1} s after step one was created",
        created.elapsed().as_secs_f64()
    );
    let took = finished(&stage, "step-one", created).await;
    eprintln!("step one completed {took:.1} s after its creation");

    let serving = registry_processes(&stage.client, 1).await;
    let created = Instant::now();
    ready
        .jobs
        .create(&PostParams::default(), &two)
        .await
        .expect("step two is admitted");
    let (pulled_from, sent) = kill_mid_transfer(&serving, Way::Sent, "the pull").await;
    eprintln!(
        "killed {pulled_from}'s registry after it sent {sent} of {LARGE} B, {:.1} s after step two was created",
        created.elapsed().as_secs_f64()
    );
    let took = finished(&stage, "step-two", created).await;
    eprintln!("step two completed {took:.1} s after its creation");

    registry_processes(&stage.client, 2).await;
    let both = replicas(&stage.client).await;
    assert_eq!(
        both.len(),
        2,
        "{}",
        diagnostics(&stage.cluster, WORKFLOW).await
    );
    read_back_from_each(&stage.client, &both, LARGE).await;
}
