//! Resident memory of `ocifit run` (the binary this bench builds, so the bench profile's
//! optimisations) with 5,000 nodes and 100 policies on a real apiserver: `cargo bench --bench
//! memory`, with the webhook served. Nodes carry the metadata a real node has (about 30 labels, a few annotations,
//! managed fields from their creation); the policies share one artifact listing the three flavor
//! images, so every policy resolves. Prints the current (VmRSS) and peak (VmHWM) resident memory
//! at start, with the nodes, once every policy is Ready, and after a relabel of every tenth node.

#[path = "../tests/cluster/support/mod.rs"]
#[allow(dead_code)] // the cluster tests' support: the bench uses a part of it
mod support;

use std::time::{Duration, Instant};

use futures_util::{StreamExt, stream};
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{FakeNode, create_node};
use support::{Controller, Env, FLAVOR, is};

const NODES: usize = 5_000;
const POLICIES: usize = 100;
const FLAVORS: [&str; 3] = ["vanilla", "chocolate", "strawberry"];

#[tokio::main]
async fn main() {
    let env = Env::start().await;
    env.push_flavors().await;
    // The webhook is served as in production: its index holds every node's labels too.
    let ca = CertificateAuthority::new("memory bench CA").expect("a CA");
    let serving = ca
        .issue_server("ocifit-webhook", &["127.0.0.1"])
        .expect("a serving certificate");
    let (cert, key) = (
        env.cluster.dir().join("tls.crt"),
        env.cluster.dir().join("tls.key"),
    );
    std::fs::write(&cert, &serving.cert_pem).expect("the certificate");
    std::fs::write(&key, &serving.key_pem).expect("the key");
    let webhook = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let controller = Controller::start(
        &env,
        "memory",
        &[
            "--webhook-bind-address",
            &webhook,
            "--tls-cert-file",
            &cert.display().to_string(),
            "--tls-key-file",
            &key.display().to_string(),
        ],
    )
    .await;
    report(&controller, "started, no node and no policy");
    let started = Instant::now();
    stream::iter(0..NODES)
        .for_each_concurrent(32, |i| {
            let client = env.client.clone();
            async move {
                create_node(&client, &realistic_node(i))
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

/// A node with the metadata of a real one: kubelet, cloud and NFD labels, a few annotations.
fn realistic_node(i: usize) -> FakeNode {
    let name = format!("node-{i:05}");
    let mut node = FakeNode::new(&name)
        .label("kubernetes.io/os", "linux")
        .label("kubernetes.io/arch", "amd64")
        .label("beta.kubernetes.io/os", "linux")
        .label("beta.kubernetes.io/arch", "amd64")
        .label("node.kubernetes.io/instance-type", "m7i.2xlarge")
        .label("topology.kubernetes.io/region", "eu-west-1")
        .label(
            "topology.kubernetes.io/zone",
            ["eu-west-1a", "eu-west-1b", "eu-west-1c"][i % 3],
        )
        .label("example.com/rack", &format!("rack-{}", i % 40))
        .label(FLAVOR, FLAVORS[i % 3]);
    for feature in [
        "cpu-cpuid.ADX",
        "cpu-cpuid.AESNI",
        "cpu-cpuid.AVX",
        "cpu-cpuid.AVX2",
        "cpu-cpuid.AVX512F",
        "cpu-cpuid.AVX512BW",
        "cpu-cpuid.AVX512CD",
        "cpu-cpuid.AVX512DQ",
        "cpu-cpuid.FMA3",
        "cpu-cpuid.SHA",
        "cpu-cpuid.VAES",
        "cpu-cpuid.VPCLMULQDQ",
        "cpu-hardware_multithreading",
        "kernel-config.NO_HZ",
        "kernel-config.NO_HZ_IDLE",
        "kernel-version.major",
        "kernel-version.minor",
        "pci-1af4.present",
        "system-os_release.ID",
        "system-os_release.VERSION_ID",
    ] {
        node = node.label(&format!("feature.node.kubernetes.io/{feature}"), "true");
    }
    node
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
        "ocifit run, {when}: VmRSS {} (peak VmHWM {})",
        field("VmRSS:"),
        field("VmHWM:")
    );
}
