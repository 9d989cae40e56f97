//! `ocifit placement audit` (the binary this bench builds, each run a new process, so every image
//! is read afresh) against the test kit's real apiserver with kwok running 1,000 pods under a
//! PlacementPolicy on five amd64 and five arm64 nodes, their three images (amd64, arm64, both) in
//! the real registry; one pod in 25 runs an image built for the other architecture. Five runs:
//! wall time min/median/max, and each run must list exactly the misplaced pods; the registry
//! requests the audit printed. Done when: under 10 s. `cargo bench --bench placement_audit`;
//! without `--bench` (`cargo test --benches`) 50 pods and one run check the path.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use ocifit_cluster_tests::Env;
use ocifit_cluster_tests::objects::linux_node;
use ocifit_cluster_tests::placement::create_policy;
use ocifit_testkit::{Cluster, Registry, TestPod};
use serde_json::json;

const NAMESPACE: &str = "fleet";
/// Nodes of each architecture.
const NODES: usize = 5;

#[derive(Clone, Copy, PartialEq)]
enum Arch {
    Amd64,
    Arm64,
}

/// What pod `i` runs where: every other pod on an arm64 node; one in 25 an image of the other
/// architecture alone (misplaced), one in 3 of the rest the image of both, the others their node's.
fn planned(i: usize) -> (String, Option<Arch>, bool) {
    let node = if i.is_multiple_of(2) {
        Arch::Amd64
    } else {
        Arch::Arm64
    };
    let other = if node == Arch::Amd64 {
        Arch::Arm64
    } else {
        Arch::Amd64
    };
    let name = match node {
        Arch::Amd64 => format!("amd-{}", i % NODES),
        Arch::Arm64 => format!("arm-{}", i % NODES),
    };
    match i {
        i if i % 25 == 3 => (name, Some(other), true),
        i if i.is_multiple_of(3) => (name, None, false),
        _ => (name, Some(node), false),
    }
}

/// Waits until `count` pods of `pods` run (kwok starts them), for five minutes at most.
async fn wait_running(pods: &Api<Pod>, count: usize) {
    let running = ListParams::default().fields("status.phase=Running");
    for _ in 0..600 {
        let listed = pods.list_metadata(&running).await.expect("pods listed");
        if listed.items.len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("{count} pods not running after five minutes");
}

/// The images' references: built for amd64 alone, for arm64 alone, and for both (an index).
async fn push_images(registry: &Registry) -> [String; 3] {
    let amd = registry.push_image("audit/amd", "v1", "linux/amd64");
    let arm = registry.push_image("audit/arm", "v1", "linux/arm64");
    let both = registry.push_multi_platform("audit/both", "v1", &["linux/amd64", "linux/arm64"]);
    [amd.await, arm.await, both.await].map(|pushed| pushed.expect("pushed").reference)
}

/// One audit run: its wall time and report.
async fn audit(env: &Env) -> (Duration, serde_json::Value) {
    let started = Instant::now();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_ocifit"))
        .args(["placement", "audit", "-o", "json", "--plain-http"])
        .arg("--kubeconfig")
        .arg(env.cluster.kubeconfig())
        .output()
        .await
        .expect("ocifit runs");
    let took = started.elapsed();
    assert_eq!(
        output.status.code(),
        Some(1),
        "exit 1 (misplaced pods); stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = serde_json::from_slice(&output.stdout).expect("a JSON report");
    (took, report)
}

#[tokio::main]
async fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (pods, runs) = if bench { (1_000, 5) } else { (50, 1) };
    let env = Env::start_with(env!("CARGO_BIN_EXE_ocifit"), Cluster::builder().with_kwok()).await;
    let client = env.client.clone();
    let [amd, arm, both] = push_images(env.registry()).await;
    for i in 0..NODES {
        for (name, arch) in [(format!("amd-{i}"), "amd64"), (format!("arm-{i}"), "arm64")] {
            let node = linux_node(&name).resources("64", "256Gi", "300");
            env.add_node(node.label("kubernetes.io/arch", arch)).await;
        }
    }
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    create_policy(&client, "everything", json!({})).await;

    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut misplaced = BTreeSet::new();
    let mut fleet = Vec::new();
    for i in 0..pods {
        let (node, arch, wrong) = planned(i);
        let image = match arch {
            None => &both,
            Some(Arch::Amd64) => &amd,
            Some(Arch::Arm64) => &arm,
        };
        let name = format!("app-{i}");
        if wrong {
            misplaced.insert(name.clone());
        }
        let mut pod = TestPod::named(&name).image(image).build();
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(node);
        }
        fleet.push(pod);
    }
    // 16 creations in flight, as a ReplicaSet controller sends them.
    futures_util::stream::iter(fleet)
        .for_each_concurrent(16, |pod| {
            let api = &api;
            async move {
                api.create(&PostParams::default(), &pod)
                    .await
                    .expect("a pod created");
            }
        })
        .await;
    wait_running(&api, pods).await;

    let mut times = Vec::new();
    let mut requests = BTreeSet::new();
    for _ in 0..runs {
        let (took, report) = audit(&env).await;
        assert_eq!(
            report["audited"], pods,
            "every running pod audited: {report}"
        );
        let listed: BTreeSet<String> = report["misplaced"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|found| found["pod"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(listed, misplaced, "exactly the misplaced pods");
        requests.insert(report["registryRequests"].as_u64().expect("a count"));
        times.push(took);
    }
    times.sort();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let seconds = |d: &Duration| d.as_secs_f64();
    println!(
        "ocifit placement audit, {pods} running pods (kwok, {} nodes, 3 images), {runs} run(s) \
         ({cores} cores, load average at the end {}):\n  wall time min {:.2} s, median {:.2} s, \
         max {:.2} s; {} misplaced, as made; registry requests per run {requests:?}",
        2 * NODES,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        seconds(&times[0]),
        seconds(&times[times.len() / 2]),
        seconds(&times[times.len() - 1]),
        misplaced.len(),
    );
}
