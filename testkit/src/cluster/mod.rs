//! A throwaway Kubernetes control plane on loopback: etcd and kube-apiserver, optionally
//! kube-controller-manager, kube-scheduler and kwok, optionally a registry beside it, and optionally
//! real nodes (then the apiserver and the registry listen on this machine's own address instead of
//! loopback, where pods reach them). It owns start-up order, readiness and teardown; what the tests
//! do with the cluster lives elsewhere.

mod components;
pub(crate) mod kubeconfig;
mod start;

pub(crate) use components::REAL_NODE_LABEL;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::command::Invocation;
use crate::error::Result;
use crate::node::{RealNode, RunningNode};
use crate::process::{Process, log_tails};
use crate::registry::{Registry, RegistryBuilder};
use crate::tools::{Tool, Tools};
use crate::workdir::Workdir;

/// How long each start-up step may take by default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Which components to start; see [`Cluster::builder`].
#[derive(Debug)]
pub struct ClusterBuilder {
    controller_manager: bool,
    scheduler: bool,
    kwok: bool,
    registry: Option<RegistryBuilder>,
    real_nodes: Vec<RealNode>,
    apiserver_args: Vec<OsString>,
    timeout: Duration,
}

/// How long start-up took, per step.
#[derive(Clone, Copy, Debug)]
pub struct StartupTimes {
    /// From the start until etcd was healthy, kube-apiserver ready and the default namespace there.
    pub control_plane: Duration,
    /// From then until the controllers were up (the default ServiceAccount exists when the
    /// controller-manager runs); None without controllers.
    pub controllers: Option<Duration>,
    /// From the start until the registry answered; it starts alongside the control plane.
    pub registry: Option<Duration>,
    /// From the controllers until every real node was Ready; None without real nodes.
    pub real_nodes: Option<Duration>,
    /// The whole start.
    pub total: Duration,
}

/// A running cluster. Dropping it kills every component (SIGKILL) and removes its directory; when
/// dropped during a panic (a failed test) it first prints the end of every component's log.
pub struct Cluster {
    // Field order is drop order: real nodes, then controllers before the apiserver before etcd,
    // files last.
    nodes: Vec<RunningNode>,
    controllers: Vec<Process>,
    apiserver: Process,
    etcd: Process,
    registry: Option<Registry>,
    config: kube::Config,
    kubeconfig: PathBuf,
    tools: Tools,
    startup: StartupTimes,
    workdir: Workdir,
}

impl Cluster {
    /// A builder for etcd and kube-apiserver alone; add components with its `with_…` methods.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder {
            controller_manager: false,
            scheduler: false,
            kwok: false,
            registry: None,
            real_nodes: Vec::new(),
            apiserver_args: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A new kube client for this cluster, bound to the calling tokio runtime (a test's runtime
    /// ends with the test, so tests sharing a cluster each make their own).
    pub fn client(&self) -> Result<kube::Client> {
        client(&self.config)
    }

    /// The kube client configuration (admin).
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// The admin kubeconfig file, for kubectl and Helm (`KUBECONFIG=…`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The registry started with the cluster, if one was asked for.
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// The real node named `name`, if the cluster has it.
    pub fn real_node(&self, name: &str) -> Option<&RunningNode> {
        self.nodes.iter().find(|node| node.name() == name)
    }

    /// The cluster's real nodes, in the order they were asked for.
    pub fn real_nodes(&self) -> &[RunningNode] {
        &self.nodes
    }

    /// The tools cache the cluster's components came from (for Helm, kubeconform, …).
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// The cluster's directory, removed with it: scratch space for a test's files.
    pub fn dir(&self) -> &Path {
        self.workdir.path()
    }

    /// The process ids of kube-apiserver and etcd, for a bench that reads their CPU time from
    /// `/proc`.
    pub fn control_plane_pids(&self) -> (u32, u32) {
        (self.apiserver.pid(), self.etcd.pid())
    }

    /// How long start-up took.
    pub fn startup_times(&self) -> StartupTimes {
        self.startup
    }

    /// Runs `kubectl` with the admin kubeconfig; its stdout, or an error carrying its stderr.
    pub async fn kubectl<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.kubectl_invocation(args)?.run().await
    }

    /// Runs `kubectl` with `input` on its stdin (e.g. `apply -f -`).
    pub async fn kubectl_with_input<I, S>(&self, args: I, input: &str) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.kubectl_invocation(args)?
            .input(input.as_bytes())
            .run()
            .await
    }

    fn kubectl_invocation<I, S>(&self, args: I) -> Result<Invocation<'static>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let kubectl = self.tools.path(Tool::Kubectl)?;
        Ok(Invocation::new(kubectl)
            .args(args.into_iter().map(|a| a.as_ref().to_owned()))
            .env("KUBECONFIG", self.kubeconfig.as_os_str()))
    }

    /// The last lines of every component's log, each under its name.
    pub fn log_tails(&self) -> String {
        let nodes = self.nodes.iter().flat_map(RunningNode::processes);
        let mut tails = log_tails(
            nodes
                .chain(&self.controllers)
                .chain([&self.apiserver, &self.etcd]),
        );
        if let Some(registry) = &self.registry {
            tails.push('\n');
            tails.push_str(&registry.log_tails());
        }
        tails
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "ocifit-testkit: the test failed; the cluster's logs end with:\n{}",
                self.log_tails()
            );
        }
    }
}

impl ClusterBuilder {
    /// Adds kube-controller-manager (Deployments → ReplicaSets → Pods, default ServiceAccounts).
    pub fn with_controller_manager(mut self) -> Self {
        self.controller_manager = true;
        self
    }

    /// Adds kube-scheduler.
    pub fn with_scheduler(mut self) -> Self {
        self.scheduler = true;
        self
    }

    /// Adds kwok: fake kubelets that make Nodes Ready and bound pods Running.
    pub fn with_kwok(mut self) -> Self {
        self.kwok = true;
        self
    }

    /// Adds kube-controller-manager, kube-scheduler and kwok.
    pub fn with_all_controllers(self) -> Self {
        self.with_controller_manager().with_scheduler().with_kwok()
    }

    /// Adds a real node (containerd, kubelet, kube-proxy; see [`RealNode`]) beside any kwok ones,
    /// and with it kube-controller-manager and kube-scheduler (ServiceAccounts, scheduling). The
    /// apiserver and the registry then listen on this machine's own address, where pods reach them
    /// (`Registry::addr` says which). Needs root. May be repeated.
    pub fn real_node(mut self, node: RealNode) -> Self {
        self.real_nodes.push(node);
        self.with_controller_manager().with_scheduler()
    }

    /// Whether the cluster will have real nodes.
    pub(crate) fn has_real_nodes(&self) -> bool {
        !self.real_nodes.is_empty()
    }

    /// Starts a registry alongside the cluster.
    pub fn with_registry(mut self, registry: RegistryBuilder) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Adds a flag to kube-apiserver's command line, after the test kit's own (e.g.
    /// `--enable-aggregator-routing=true`, so webhooks dial their Service's endpoints).
    pub fn apiserver_arg(mut self, arg: impl Into<OsString>) -> Self {
        self.apiserver_args.push(arg.into());
        self
    }

    /// How long each start-up step may take (default one minute).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

fn client(config: &kube::Config) -> Result<kube::Client> {
    kube::Client::try_from(config.clone()).map_err(crate::error::kube("build a kube client"))
}
