//! Resident memory and idle CPU of `ocifit run` (the binary this bench builds, so the bench
//! profile's optimisations) with 5,000 nodes, 100 policies and 5,000 NodeFeature objects on a real
//! apiserver, the webhook served: `cargo bench --bench memory`. Nodes carry the metadata a real
//! node has (about 30 labels, a few annotations, managed fields from their creation); the policies
//! share one artifact listing the three flavor images, so every policy resolves; each node has a
//! NodeFeature object as nfd-worker publishes it (CPUID flags, kernel and OS attributes, PCI
//! devices). Prints the current (VmRSS) and peak (VmHWM) resident memory after each step (and
//! of it, the heap's and the binary's share), the
//! process's CPU (a share of one core, per thread group with its wake-ups: `idle`) in the tail of
//! the NodeFeatures' creation, once its work has settled with the cluster quiet, and while 50
//! nodes post a heartbeat every 100 ms, and how long a relabel takes to reach the webhook's index
//! (patch answered → `ocifit_webhook_index_rebuilds_total` moved).

mod idle;

use std::time::{Duration, Instant};

use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use ocifit_cluster_tests::webhook::WebhookCertificate;
use ocifit_cluster_tests::{Controller, Env, FLAVOR, free_address, get, is};
use ocifit_testkit::flavors::{FLAVORS, realistic_flavor_node};
use ocifit_testkit::{Tool, create_namespace, create_node};

const NODES: usize = 5_000;
const POLICIES: usize = 100;
const NFD_NAMESPACE: &str = "node-feature-discovery";
const HEARTBEATING: usize = 50;
const RELABELS: usize = 20;

#[tokio::main]
async fn main() {
    let env = Env::start(env!("CARGO_BIN_EXE_ocifit")).await;
    env.push_flavors().await;
    install_nfd(&env).await;
    // The webhook is served as in production: its index reads every node's labels too.
    let certificate = WebhookCertificate::issue(&env, &["127.0.0.1"]);
    let controller = certificate
        .serve(
            &env,
            "memory",
            &free_address(),
            &["--nfd-discovery-interval", "1s"],
        )
        .await;
    report(&controller, "started, no node and no policy");
    let started = Instant::now();
    stream::iter(0..NODES)
        .for_each_concurrent(32, |i| {
            let client = env.client.clone();
            async move {
                create_node(&client, &realistic_flavor_node(i))
                    .await
                    .expect("a node");
            }
        })
        .await;
    println!(
        "{NODES} nodes created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    report(&controller, &format!("{NODES} nodes, no policy"));
    let started = Instant::now();
    for i in 0..POLICIES {
        env.create_policy(&env.flavor_policy(&format!("p{i:03}")))
            .await;
    }
    wait_all_ready(&env).await;
    println!(
        "{POLICIES} policies created and Ready over {NODES} nodes in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    report(&controller, "all policies Ready");

    let started = Instant::now();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("nfd.k8s-sigs.io", "v1alpha1", "NodeFeature"),
        "nodefeatures",
    );
    let features: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), NFD_NAMESPACE, &resource);
    stream::iter(0..NODES)
        .for_each_concurrent(32, |i| {
            let features = features.clone();
            async move {
                features
                    .create(&PostParams::default(), &node_feature(i))
                    .await
                    .expect("a NodeFeature");
            }
        })
        .await;
    println!(
        "{NODES} NodeFeature objects created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    report(&controller, &format!("{NODES} NodeFeature objects too"));

    // Measured in the tail of the NodeFeatures' creation, the CPU is that burst's work.
    let tail = idle::cpu_share(
        &controller,
        "the 10 s right after the NodeFeatures' burst",
        Duration::from_secs(10),
        std::future::pending(),
    )
    .await;
    let settled = idle::settle(
        &controller,
        Duration::from_secs(5),
        Duration::from_secs(120),
    )
    .await;
    println!(
        "ocifit's work counters last moved {:.1} s after that window",
        settled.as_secs_f64()
    );
    let quiet = idle::cpu_share(
        &controller,
        "cluster quiet for 20 s (its work settled)",
        Duration::from_secs(20),
        std::future::pending(),
    )
    .await;
    let beating = idle::cpu_share(
        &controller,
        &format!("{HEARTBEATING} node heartbeats every 100 ms for 20 s"),
        Duration::from_secs(20),
        heartbeats(&env),
    )
    .await;
    println!(
        "idle CPU: {:.2}% of a core quiet, {:.2}% with heartbeats ({:.2}% in the burst's tail); \
         target under 1%",
        quiet * 100.0,
        beating * 100.0,
        tail * 100.0
    );
    report(&controller, "after the heartbeats");

    relabel_to_index(&env, &controller).await;

    stream::iter((0..NODES).step_by(10))
        .for_each_concurrent(32, |i| {
            let env = &env;
            async move {
                env.label_node(&format!("node-{i:05}"), "example.com/rack", "moved")
                    .await;
            }
        })
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    report(&controller, "after relabelling 500 nodes");
    assert!(controller.stop().await.success());
}

/// NFD's CRDs and its namespace, before ocifit starts (it finds the NodeFeature API at once).
async fn install_nfd(env: &Env) {
    let crds = env
        .cluster
        .tools()
        .path(Tool::NfdCrds)
        .expect("NFD's CRDs from tools/install");
    env.cluster
        .kubectl(["apply", "-f", &crds.display().to_string()])
        .await
        .expect("NFD's CRDs");
    create_namespace(&env.client, NFD_NAMESPACE)
        .await
        .expect("NFD's namespace");
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// `HEARTBEATING` nodes post their Ready condition every 100 ms, as kubelets do (status only:
/// labels unchanged), until dropped.
async fn heartbeats(env: &Env) {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let mut ticks = tokio::time::interval(Duration::from_millis(100));
    loop {
        ticks.tick().await;
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        stream::iter(0..HEARTBEATING)
            .for_each_concurrent(HEARTBEATING, |i| {
                let nodes = nodes.clone();
                let now = now.clone();
                async move {
                    let status = serde_json::json!({"status": {"conditions": [{
                        "type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
                    let _ = nodes
                        .patch_status(
                            &format!("node-{i:05}"),
                            &PatchParams::default(),
                            &Patch::Merge(status),
                        )
                        .await;
                }
            })
            .await;
    }
}

/// How long a relabel that moves a node to another class takes to reach the webhook's index.
async fn relabel_to_index(env: &Env, controller: &Controller) {
    let series = "ocifit_webhook_index_rebuilds_total";
    let mut took = Vec::new();
    for round in 0..RELABELS {
        // node-04999 starts as FLAVORS[4999 % 3]: each round moves it to the next flavor.
        let flavor = FLAVORS[(4999 + round + 1) % 3];
        let before = metric(controller, series).await;
        env.label_node("node-04999", FLAVOR, flavor).await;
        let patched = Instant::now();
        loop {
            if metric(controller, series).await > before {
                took.push(patched.elapsed());
                break;
            }
            assert!(
                patched.elapsed() < Duration::from_secs(10),
                "the index never moved"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Let the controller's reconciles and their status writes settle before the next one.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    took.sort();
    println!(
        "relabel → webhook index rebuilt ({RELABELS} relabels moving a node to another class): \
         median {:.1} ms, max {:.1} ms (patch answered → rebuild counted, polled every 1 ms)",
        took[took.len() / 2].as_secs_f64() * 1e3,
        took[took.len() - 1].as_secs_f64() * 1e3
    );
}

async fn metric(controller: &Controller, series: &str) -> f64 {
    let (_, body) = get(&controller.admin, "/metrics").await.expect("/metrics");
    body.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A NodeFeature as nfd-worker publishes it for node `i` (three kinds of machine).
fn node_feature(i: usize) -> DynamicObject {
    let kind = i % 3;
    let mut flags: Vec<String> = [
        "ADX",
        "AESNI",
        "AVX",
        "AVX2",
        "BMI1",
        "BMI2",
        "CLMUL",
        "CMOV",
        "CX16",
        "ERMS",
        "F16C",
        "FMA3",
        "FSRM",
        "FXSR",
        "HYPERVISOR",
        "LAHF",
        "MOVBE",
        "OSXSAVE",
        "POPCNT",
        "RDRAND",
        "RDSEED",
        "RDTSCP",
        "SHA",
        "SSE",
        "SSE2",
        "SSE3",
        "SSE4",
        "SSE42",
        "SSSE3",
        "VAES",
        "VPCLMULQDQ",
        "X87",
        "XGETBV1",
        "XSAVE",
        "XSAVEC",
        "XSAVEOPT",
        "XSAVES",
    ]
    .iter()
    .map(|f| (*f).to_owned())
    .collect();
    if kind == 0 {
        flags
            .extend(["AVX512F", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512VL"].map(str::to_owned));
    }
    let elements = |pairs: &[(&str, String)]| {
        serde_json::Value::Object(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), serde_json::Value::String(v.clone())))
                .collect(),
        )
    };
    let kernel_config: Vec<(&str, String)> = [
        "NO_HZ",
        "NO_HZ_IDLE",
        "NO_HZ_FULL",
        "PREEMPT",
        "X86_64",
        "SMP",
        "NUMA",
        "CGROUPS",
        "MEMCG",
        "BPF",
        "BPF_SYSCALL",
        "SECCOMP",
        "NAMESPACES",
        "USER_NS",
        "IKCONFIG",
    ]
    .iter()
    .map(|k| (*k, "y".to_owned()))
    .collect();
    let value = serde_json::json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": format!("node-{i:05}"),
            "namespace": NFD_NAMESPACE,
            "labels": {"nfd.node.kubernetes.io/node-name": format!("node-{i:05}")}
        },
        "spec": {"features": {
            "flags": {"cpu.cpuid": {"elements": flags.iter().map(|f| (f.clone(), serde_json::json!({}))).collect::<serde_json::Map<_, _>>()}},
            "attributes": {
                "cpu.model": {"elements": elements(&[("family", "6".into()), ("id", ["143", "106", "85"][kind].into()), ("vendor_id", "Intel".into())])},
                "kernel.version": {"elements": elements(&[("full", "6.8.0-1015-aws".into()), ("major", "6".into()), ("minor", "8".into()), ("revision", "0".into())])},
                "system.osrelease": {"elements": elements(&[("ID", "ubuntu".into()), ("VERSION_ID", "24.04".into()), ("VERSION_ID.major", "24".into()), ("VERSION_ID.minor", "04".into())])},
                "kernel.config": {"elements": elements(&kernel_config)}
            },
            "instances": {
                "pci.device": {"elements": [
                    {"attributes": {"class": "0200", "vendor": "1d0f", "device": "ec20", "subsystem_vendor": "1d0f"}},
                    {"attributes": {"class": "0108", "vendor": "1d0f", "device": "8061", "subsystem_vendor": "1d0f"}}
                ]}
            }
        }}
    });
    serde_json::from_value(value).expect("a NodeFeature")
}

async fn wait_all_ready(env: &Env) {
    let start = Instant::now();
    loop {
        let policies = env
            .policies()
            .list(&Default::default())
            .await
            .expect("policies");
        let ready = policies
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .is_some_and(|s| is(s, "Ready", "True", "Resolved"))
            })
            .count();
        if ready == POLICIES {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "only {ready} of {POLICIES} policies Ready after 300 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn report(controller: &Controller, when: &str) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", controller.pid()))
        .expect("the process's status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("?")
            .to_owned()
    };
    println!(
        "ocifit run, {when}: VmRSS {} (peak VmHWM {}; heap and stacks RssAnon {}, code RssFile {})",
        field("VmRSS:"),
        field("VmHWM:"),
        field("RssAnon:"),
        field("RssFile:")
    );
}
