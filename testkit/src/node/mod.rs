//! A real Kubernetes node beside kwok's fake ones: containerd, the kubelet and kube-proxy
//! (iptables mode) running real containers from images built on this machine, following the
//! project's real-node reference.
//!
//! The node is a small machine of its own: its processes run in a network and a mount namespace
//! of their own, linked to this host by a veth pair (`network`), with a private `/run`, `/var/lib`
//! and `/var/log`, and in a cgroup of their own (`cgroups`). So its bridge, its iptables chains
//! (kube-proxy's names are fixed), its pods' mounts and network namespaces cannot collide with
//! another node's or the machine's, and all of it vanishes with its processes. The few things that
//! are machine-wide (the host's end of the link, two host firewall rules, the cgroup, the kubelet's
//! kernel sysctls) are named for a slot the node holds for its lifetime and given back on Drop, also
//! when a test panics; a node whose test process was killed is swept by the next one (`slot`).
//!
//! It needs root, cgroup v1, and what `tools/install` provides (kubelet, kube-proxy, pause, and
//! Debian's containerd, runc, CNI plugins and iptables).

mod cgroups;
mod files;
mod network;
mod slot;
mod start;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) use start::{NodeEnv, start};

use crate::process::Process;
use crate::workdir::Workdir;
use network::Link;
use slot::Slot;

/// How long the node's processes may take to end once its namespaces' init is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// A real node to start with a cluster ([`crate::ClusterBuilder::real_node`]).
#[derive(Clone, Debug)]
pub struct RealNode {
    name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<String>,
}

impl RealNode {
    /// A node named `name` (also its `kubernetes.io/hostname`).
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
        }
    }

    /// A label the node gets once it is registered, before the cluster is handed to the test (so a
    /// pod's nodeSelector can choose it, as with any node).
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// A taint the node registers with (`effect`: `NoSchedule`, `PreferNoSchedule` or
    /// `NoExecute`): only pods that tolerate it land there, e.g. to keep pods meant for kwok's
    /// nodes off it.
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push(format!("{key}={value}:{effect}"));
        self
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A running real node, owned by its [`crate::Cluster`] and torn down with it.
pub struct RunningNode {
    // Drop kills the namespaces' init first, which kills every process of the node; then, field
    // order being drop order, the processes this kit started are reaped, the slot kills whatever
    // is still in the node's cgroup and gives the machine back; files last.
    init: Option<u32>,
    processes: Vec<Process>,
    slot: Slot,
    name: String,
    link: Link,
    startup: Duration,
    workdir: Workdir,
}

impl RunningNode {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's address (its InternalIP; the kubelet listens there).
    pub fn address(&self) -> Ipv4Addr {
        self.link.node_ip
    }

    /// The subnet its pods get addresses from.
    pub fn pod_subnet(&self) -> &str {
        &self.link.pod_subnet
    }

    /// From the start of the node until it was Ready, labelled, and kube-proxy healthy.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The host's end of the node's link: a network interface of this host while the node runs.
    pub fn host_interface(&self) -> &str {
        &self.link.host_veth
    }

    /// The node's cgroup (in every cgroup hierarchy), as the kubelet's `cgroupRoot` names it.
    pub fn cgroup(&self) -> String {
        self.slot.cgroups().kubelet_root()
    }

    /// The node's directory (containerd's root and state, the kubelet's, configuration).
    pub fn dir(&self) -> &Path {
        self.workdir.path()
    }

    /// Kills the init of the node's PID namespace (the kernel then kills every process in it) and
    /// waits a moment for the processes this kit started to end by themselves, so each is reaped
    /// by its own parent.
    fn stop(&mut self) {
        let Some(init) = self.init.take() else {
            return;
        };
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &init.to_string()])
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline
            && self
                .processes
                .iter_mut()
                .any(|p| p.check_running("the node to stop").is_ok())
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The node's processes, for the cluster's logs.
    pub(crate) fn processes(&self) -> &[Process] {
        &self.processes
    }
}

impl Drop for RunningNode {
    fn drop(&mut self) {
        self.stop();
    }
}
