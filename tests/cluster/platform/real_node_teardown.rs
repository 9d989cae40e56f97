//! A real node gives the machine back when its cluster is dropped, also while a test panics: no
//! process of it is left (containerd, the kubelet, kube-proxy, the shims and the containers), no
//! cgroup, no host network interface or firewall rule, no mount, no directory, and the kernel
//! sysctls the kubelet changed are restored once no other real node runs (checked here when no other
//! node ran meanwhile; the test kit's unit tests check the bookkeeping).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit_testkit::image::flavor_image;
use ocifit_testkit::{Cluster, RealNode, Registry, wait_for_pod_log};

const SYSCTLS: [&str; 3] = [
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
];

fn sysctls() -> Vec<String> {
    SYSCTLS
        .iter()
        .map(|key| std::fs::read_to_string(Path::new("/proc/sys").join(key)).expect("a sysctl"))
        .collect()
}

/// Whether any real node (of this or another process) holds a slot.
fn real_nodes_running() -> bool {
    std::fs::read_dir("/run/ocifit-testkit")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("node-"))
}

fn cgroup_dirs(cgroup: &str) -> Vec<String> {
    std::fs::read_dir("/sys/fs/cgroup")
        .expect("cgroup hierarchies")
        .flatten()
        .map(|h| h.path().join(cgroup.trim_start_matches('/')))
        .filter(|dir| dir.exists())
        .map(|dir| dir.display().to_string())
        .collect()
}

fn processes_in(cgroup: &str) -> Vec<String> {
    let output = Command::new("find")
        .args([
            &format!("/sys/fs/cgroup/pids{cgroup}"),
            "-name",
            "cgroup.procs",
        ])
        .output()
        .expect("find");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .flat_map(|file| {
            std::fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn stdout(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().expect(program);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn a_node_dropped_while_its_test_panics_leaves_nothing_behind() {
    let alone = !real_nodes_running();
    let before = sysctls();
    let cluster = Cluster::builder()
        .with_all_controllers()
        .with_registry(Registry::builder())
        .real_node(RealNode::new("doomed"))
        .start()
        .await
        .expect("a cluster with a real node");
    let client = cluster.client().expect("a client");
    let registry = cluster.registry().expect("a registry");
    let image = registry
        .push_built(
            &flavor_image("still here").expect("an image"),
            "doomed/app",
            "v1",
        )
        .await
        .expect("the image is pushed");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "app"},
        "spec": {
            "nodeName": "doomed",
            "containers": [{"name": "main", "image": image.reference}],
        },
    }))
    .expect("a pod");
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created");
    wait_for_pod_log(
        &client,
        "default",
        "app",
        "still here",
        Duration::from_secs(60),
    )
    .await
    .expect("the container runs");

    let node = cluster.real_node("doomed").expect("the node");
    let interface = node.host_interface().to_owned();
    let cgroup = node.cgroup();
    let dir = node.dir().to_owned();
    let pids = processes_in(&cgroup);
    // containerd, its shim, pause, the container, the kubelet, kube-proxy, the namespaces' init…
    assert!(pids.len() >= 7, "{pids:?}");
    assert!(stdout("ip", &["link", "show", &interface]).contains(&interface));
    assert!(stdout("iptables", &["-w", "-S", "FORWARD"]).contains(&interface));
    assert!(!cgroup_dirs(&cgroup).is_empty());
    if alone {
        assert_ne!(sysctls(), before, "the kubelet tunes the kernel");
    }

    let owner = tokio::spawn(async move {
        let _cluster = cluster;
        panic!("a test fails while it owns a cluster with a real node");
    });
    assert!(owner.await.expect_err("the test panicked").is_panic());

    let alive: Vec<&String> = pids
        .iter()
        .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    let described: Vec<String> = alive
        .iter()
        .map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let state = status.lines().take(3).collect::<Vec<_>>().join(" ");
            format!("{pid}: {state}")
        })
        .collect();
    assert!(alive.is_empty(), "still running: {described:?}");
    assert_eq!(cgroup_dirs(&cgroup), Vec::<String>::new());
    assert!(!stdout("ip", &["link"]).contains(&interface));
    assert!(!stdout("iptables", &["-w", "-S", "FORWARD"]).contains(&interface));
    let dir_text = dir.display().to_string();
    assert!(
        !std::fs::read_to_string("/proc/self/mountinfo")
            .expect("mounts")
            .contains(&dir_text)
    );
    assert!(!dir.exists(), "{dir_text}");
    if alone && !real_nodes_running() {
        assert_eq!(sysctls(), before, "the kernel sysctls are restored");
    } else {
        eprintln!("another real node ran meanwhile: the sysctls stay as the kubelets set them");
    }
}
