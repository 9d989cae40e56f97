//! Starting a real node: take a slot, create its cgroup and namespaces, wire its network, write its
//! configuration and certificates, start containerd and import the sandbox image, start the
//! kubelet and kube-proxy, and wait until the Node is Ready, labelled, and kube-proxy healthy.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::files::{self, KUBE_PROXY_HEALTH_PORT, NodePaths, SANDBOX_IMAGE};
use super::{RealNode, RunningNode, network, slot::Slot};
use crate::cluster::{REAL_NODE_LABEL, kubeconfig};
use crate::command::{Invocation, flag};
use crate::error::{Error, Result, io, kube as kube_error};
use crate::image::pause_image;
use crate::net::http_status;
use crate::pki::CertificateAuthority;
use crate::process::{Process, wait_until};
use crate::tools::{Tool, Tools};
use crate::workdir::Workdir;

/// The node's namespaces: PID (its init's death kills every process of the node, containers
/// included, however the test process ends), mount (its own `/proc`, and a private `/run`,
/// `/var/lib` and `/var/log`, where containerd, CNI and the kubelet write a few fixed paths) and
/// network. `unshare` forks the init, which dies with it (`--kill-child`).
const UNSHARE: [&str; 9] = [
    "--pid",
    "--fork",
    "--kill-child=KILL",
    "--mount-proc",
    "--mount",
    "--net",
    "--propagation",
    "private",
    "--",
];
/// The init: makes the private directories, then sleeps, holding the namespaces, until killed.
const INIT: &str = "for d in /run /var/lib /var/log; do \
     mount -n -t tmpfs -o mode=0755 ocifit-node \"$d\" || exit 1; done; exec sleep infinity";

/// What a node needs from its cluster.
pub(crate) struct NodeEnv<'a> {
    /// The cluster's CA: it signs the node's certificates and the clients the kubelet accepts.
    pub(crate) ca: &'a CertificateAuthority,
    /// The apiserver's URL, on this machine's own address.
    pub(crate) server: &'a str,
    /// The cluster's plain-HTTP registry (`HOST:PORT`), if it has one.
    pub(crate) registry: Option<&'a str>,
    /// Where the components' logs go (the cluster's).
    pub(crate) logs: &'a Path,
    pub(crate) tools: &'a Tools,
    /// How long each step may take.
    pub(crate) timeout: Duration,
}

/// Starts `spec` and waits until it is ready; on failure, whatever was started is torn down.
pub(crate) async fn start(
    spec: &RealNode,
    env: &NodeEnv<'_>,
    client: &kube::Client,
) -> Result<RunningNode> {
    let started = Instant::now();
    let kubelet = env.tools.path(Tool::Kubelet)?;
    let kube_proxy = env.tools.path(Tool::KubeProxy)?;
    let pause = pause_image(env.tools)?;
    let workdir = Workdir::create("node-")?;
    let slot = Slot::acquire()?;
    let mut node = RunningNode {
        init: None,
        processes: Vec::new(),
        link: slot.link(),
        slot,
        name: spec.name.clone(),
        startup: Duration::ZERO,
        workdir,
    };
    let paths = NodePaths {
        dir: node.workdir.path().to_owned(),
    };
    node.slot.cgroups().create()?;
    write_files(spec, env, &node, &paths)?;

    let mut unshare: Vec<OsString> = UNSHARE.map(OsString::from).to_vec();
    unshare.extend(["sh", "-c", INIT].map(OsString::from));
    let forker = node.spawn(env, "namespaces", Path::new("unshare"), unshare)?;
    let mut holder = 0;
    node.wait(env, "the node's namespaces", || {
        holder = init_of(forker).unwrap_or(0);
        let ready = holder != 0
            && std::fs::read_to_string(format!("/proc/{holder}/comm"))
                .is_ok_and(|c| c.trim() == "sleep");
        std::future::ready(ready)
    })
    .await?;
    node.init = Some(holder);
    network::wire(&node.link, holder)?;

    let socket = paths.containerd_socket();
    node.inside(
        env,
        holder,
        "containerd",
        Path::new("containerd"),
        vec!["--config".into(), paths.containerd_config().into()],
    )?;
    node.wait(env, "containerd to answer", || ctr(&socket, &["version"]))
        .await?;
    let layout = pause.write_layout(&paths.path("pause"), SANDBOX_IMAGE)?;
    let archive = layout.to_tar()?;
    ctr_checked(
        &socket,
        &["images", "import", &archive.display().to_string()],
    )
    .await?;

    let mut kubelet_args = vec![
        flag("--config=", paths.kubelet_config()),
        flag("--kubeconfig=", paths.path("kubelet.kubeconfig")),
        flag("--hostname-override=", &spec.name),
        flag("--node-ip=", node.link.node_ip.to_string()),
        flag("--node-labels=", format!("{REAL_NODE_LABEL}=true")),
        flag("--root-dir=", paths.path("kubelet/root")),
    ];
    if !spec.taints.is_empty() {
        kubelet_args.push(flag("--register-with-taints=", spec.taints.join(",")));
    }
    node.inside(env, holder, "kubelet", &kubelet, kubelet_args)?;
    node.inside(
        env,
        holder,
        "kube-proxy",
        &kube_proxy,
        vec![flag("--config=", paths.kube_proxy_config())],
    )?;
    let nodes: Api<Node> = Api::all(client.clone());
    node.wait(env, "the Node to be Ready", || is_ready(&nodes, &spec.name))
        .await?;
    let health = format!(
        "http://{}:{KUBE_PROXY_HEALTH_PORT}/healthz",
        node.link.node_ip
    );
    node.wait(env, "kube-proxy to be healthy", || async {
        http_status(&health).await == Some(200)
    })
    .await?;
    if !spec.labels.is_empty() {
        let patch = serde_json::json!({"metadata": {"labels": spec.labels}});
        nodes
            .patch(&spec.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube_error(format!("label node {}", spec.name)))?;
    }
    node.startup = started.elapsed();
    Ok(node)
}

impl RunningNode {
    /// Starts `program` (its log `<node>-<component>.log`) in the node's cgroup, which it joins
    /// before it execs; its pid.
    fn spawn(
        &mut self,
        env: &NodeEnv<'_>,
        component: &str,
        program: &Path,
        args: Vec<OsString>,
    ) -> Result<u32> {
        let name = format!("{}-{component}", self.name);
        let script = format!("{} && exec \"$@\"", self.slot.cgroups().join_commands());
        let mut command: Vec<OsString> = ["-c", &script, "sh"].map(OsString::from).to_vec();
        command.push(program.into());
        command.extend(args);
        let process = Process::spawn(&name, Path::new("sh"), command, env.logs)?;
        let pid = process.pid();
        self.processes.push(process);
        Ok(pid)
    }

    /// Starts `program` inside the node's namespaces (those of `holder`, their init).
    fn inside(
        &mut self,
        env: &NodeEnv<'_>,
        holder: u32,
        component: &str,
        program: &Path,
        args: Vec<OsString>,
    ) -> Result<u32> {
        let target = holder.to_string();
        let mut command: Vec<OsString> = ["--target", &target, "--pid", "--mount", "--net", "--"]
            .map(OsString::from)
            .to_vec();
        command.push(program.into());
        command.extend(args);
        self.spawn(env, component, Path::new("nsenter"), command)
    }

    /// Waits until `ready`, failing early if any of the node's processes exits.
    async fn wait<F, Fut>(&mut self, env: &NodeEnv<'_>, what: &str, ready: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut watched: Vec<&mut Process> = self.processes.iter_mut().collect();
        wait_until(what, env.timeout, &mut watched, ready).await
    }
}

/// Certificates, kubeconfigs and every component's configuration.
fn write_files(
    spec: &RealNode,
    env: &NodeEnv<'_>,
    node: &RunningNode,
    paths: &NodePaths,
) -> Result<()> {
    let node_ip = node.link.node_ip.to_string();
    let serving = env.ca.issue_server(&spec.name, &[&node_ip, &spec.name])?;
    let kubelet_client = env
        .ca
        .issue_client(&format!("system:node:{}", spec.name), Some("system:nodes"))?;
    // The user the default RBAC binds to the node proxier role.
    let proxy_client = env.ca.issue_client("system:kube-proxy", None)?;
    let json = |value: serde_json::Value| value.to_string();
    let mut files: Vec<(PathBuf, String)> = vec![
        (paths.path("pki/ca.crt"), env.ca.cert_pem().to_owned()),
        (paths.path("pki/kubelet.crt"), serving.cert_pem),
        (paths.path("pki/kubelet.key"), serving.key_pem),
        (
            paths.path("kubelet.kubeconfig"),
            kubeconfig::render(env.server, env.ca.cert_pem(), &kubelet_client)?,
        ),
        (
            paths.path("kube-proxy.kubeconfig"),
            kubeconfig::render(env.server, env.ca.cert_pem(), &proxy_client)?,
        ),
        (paths.containerd_config(), files::containerd_config(paths)),
        (
            paths.cni_config(),
            json(files::cni_config(&node.link, &paths.path("cni/ipam"))),
        ),
        (
            paths.kubelet_config(),
            json(files::kubelet_config(
                paths,
                node.link.node_ip,
                &node.slot.cgroups().kubelet_root(),
            )),
        ),
        (
            paths.kube_proxy_config(),
            json(files::kube_proxy_config(paths, &spec.name, &node.link)),
        ),
        // No cluster DNS: pods resolve nothing, as the kubelet's own resolver file says.
        (paths.path("kubelet/resolv.conf"), String::new()),
    ];
    if let Some(registry) = env.registry {
        files.push((
            paths.registry_hosts(registry),
            files::registry_hosts(registry),
        ));
    }
    for dir in ["kubelet/static", "kubelet/pod-logs", "cni/ipam"] {
        let dir = paths.path(dir);
        std::fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
    }
    for (path, content) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io("create directory", parent))?;
        }
        std::fs::write(&path, content).map_err(io("write", &path))?;
    }
    Ok(())
}

/// The child `unshare --fork` made: the init of the node's PID namespace.
fn init_of(forker: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{forker}/task/{forker}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

async fn is_ready(nodes: &Api<Node>, name: &str) -> bool {
    let Ok(Some(node)) = nodes.get_opt(name).await else {
        return false;
    };
    node.status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether `ctr` against the node's containerd succeeds.
async fn ctr(socket: &Path, args: &[&str]) -> bool {
    ctr_checked(socket, args).await.is_ok()
}

/// `ctr --address SOCKET --namespace k8s.io ARGS` (the namespace the CRI plugin uses).
async fn ctr_checked(socket: &Path, args: &[&str]) -> Result<String> {
    Invocation::new("ctr")
        .args([
            OsString::from("--address"),
            socket.into(),
            "--namespace".into(),
            "k8s.io".into(),
        ])
        .args(args.iter().copied())
        .run()
        .await
        .map_err(|e| match e {
            Error::Spawn { source, .. } => Error::Spawn {
                program: "ctr (Debian's containerd package: run tools/install)".into(),
                source,
            },
            other => other,
        })
}
