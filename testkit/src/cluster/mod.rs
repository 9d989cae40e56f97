//! A throwaway Kubernetes control plane on loopback: etcd and kube-apiserver, optionally
//! kube-controller-manager, kube-scheduler and kwok, and optionally a registry beside it. It owns
//! start-up order, readiness and teardown; what the tests do with the cluster lives elsewhere.

mod components;
mod kubeconfig;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Api;

use crate::command::Invocation;
use crate::error::{Error, Result, io};
use crate::net::{free_port, http_status};
use crate::pki::install_crypto_provider;
use crate::process::{Process, log_tails, wait_until};
use crate::registry::{Registry, RegistryBuilder};
use crate::tools::{Tool, Tools};
use crate::workdir::Workdir;
use components::{Credentials, Ports};

/// How long each start-up step may take by default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Which components to start; see [`Cluster::builder`].
#[derive(Debug)]
pub struct ClusterBuilder {
    controller_manager: bool,
    scheduler: bool,
    kwok: bool,
    registry: Option<RegistryBuilder>,
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
    /// The whole start.
    pub total: Duration,
}

/// A running cluster. Dropping it kills every component (SIGKILL) and removes its directory; when
/// dropped during a panic (a failed test) it first prints the end of every component's log.
pub struct Cluster {
    // Field order is drop order: controllers before the apiserver before etcd, files last.
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

    /// The tools cache the cluster's components came from (for Helm, kubeconform, …).
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// The cluster's directory, removed with it: scratch space for a test's files.
    pub fn dir(&self) -> &Path {
        self.workdir.path()
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
        let mut tails = log_tails(self.controllers.iter().chain([&self.apiserver, &self.etcd]));
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

    /// Starts a registry alongside the cluster.
    pub fn with_registry(mut self, registry: RegistryBuilder) -> Self {
        self.registry = Some(registry);
        self
    }

    /// How long each start-up step may take (default one minute).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Starts the cluster and waits until it is ready.
    pub async fn start(self) -> Result<Cluster> {
        let started = Instant::now();
        install_crypto_provider();
        let tools = Tools::locate()?;
        // Every tool is looked up before anything starts, so a missing one fails at once.
        let etcd_bin = tools.path(Tool::Etcd)?;
        let apiserver_bin = tools.path(Tool::KubeApiserver)?;
        tools.path(Tool::Kubectl)?;
        let controller_manager_bin = self
            .controller_manager
            .then(|| tools.path(Tool::KubeControllerManager))
            .transpose()?;
        let scheduler_bin = self
            .scheduler
            .then(|| tools.path(Tool::KubeScheduler))
            .transpose()?;
        let kwok = self
            .kwok
            .then(|| Ok::<_, Error>((tools.path(Tool::Kwok)?, tools.kwok_stages()?)))
            .transpose()?;

        let workdir = Workdir::create("cluster-")?;
        let logs = workdir.join("logs");
        std::fs::create_dir_all(&logs).map_err(io("create directory", &logs))?;
        let credentials = Credentials::mint()?;
        let files = credentials.write(workdir.path())?;
        let ports = Ports {
            etcd_client: free_port()?,
            etcd_peer: free_port()?,
            apiserver: free_port()?,
        };
        let server = format!("https://127.0.0.1:{}", ports.apiserver);
        let kubeconfig_yaml =
            kubeconfig::render(&server, credentials.ca.cert_pem(), &credentials.admin)?;
        std::fs::write(&files.kubeconfig, &kubeconfig_yaml)
            .map_err(io("write", &files.kubeconfig))?;
        let config = kubeconfig::load(&kubeconfig_yaml).await?;

        let timeout = self.timeout;
        let registry = async {
            match self.registry {
                Some(registry) => registry.start().await.map(Some),
                None => Ok(None),
            }
        };
        let control_plane = async {
            let etcd_data = workdir.join("etcd");
            let etcd = Process::spawn(
                "etcd",
                &etcd_bin,
                components::etcd(&etcd_data, ports),
                &[],
                &logs,
            )?;
            let apiserver = Process::spawn(
                "kube-apiserver",
                &apiserver_bin,
                components::apiserver(&files, ports),
                &[],
                &logs,
            )?;
            wait_for_control_plane(etcd, apiserver, &config, ports, timeout).await
        };
        let ((mut etcd, mut apiserver), registry) = tokio::try_join!(control_plane, registry)?;
        let control_plane_time = started.elapsed();

        let mut controllers = Vec::new();
        let mut start = |name: &str, program: &Path, args| -> Result<()> {
            controllers.push(Process::spawn(name, program, args, &[], &logs)?);
            Ok(())
        };
        if let Some(program) = &controller_manager_bin {
            start(
                "kube-controller-manager",
                program,
                components::controller_manager(&files),
            )?;
        }
        if let Some(program) = &scheduler_bin {
            start("kube-scheduler", program, components::scheduler(&files))?;
        }
        if let Some((program, stages)) = &kwok {
            start("kwok", program, components::kwok(&files, stages))?;
        }
        let controllers_time = if controllers.is_empty() {
            None
        } else {
            let since = Instant::now();
            let client = client(&config)?;
            let mut watched: Vec<&mut Process> = controllers
                .iter_mut()
                .chain([&mut apiserver, &mut etcd])
                .collect();
            let default_account: Api<ServiceAccount> = Api::namespaced(client, "default");
            let wanted = controller_manager_bin.is_some();
            wait_until(
                "kube-controller-manager to create the default ServiceAccount",
                timeout,
                &mut watched,
                || async { !wanted || exists(&default_account, "default").await },
            )
            .await?;
            Some(since.elapsed())
        };

        Ok(Cluster {
            controllers,
            apiserver,
            etcd,
            startup: StartupTimes {
                control_plane: control_plane_time,
                controllers: controllers_time,
                registry: registry.as_ref().map(Registry::startup_time),
                total: started.elapsed(),
            },
            registry,
            config,
            kubeconfig: files.kubeconfig,
            tools,
            workdir,
        })
    }
}

/// Waits for etcd's health, kube-apiserver's `/readyz` and the default namespace.
async fn wait_for_control_plane(
    mut etcd: Process,
    mut apiserver: Process,
    config: &kube::Config,
    ports: Ports,
    timeout: Duration,
) -> Result<(Process, Process)> {
    let health = format!("http://127.0.0.1:{}/health", ports.etcd_client);
    wait_until("etcd to be healthy", timeout, &mut [&mut etcd], || async {
        http_status(&health).await == Some(200)
    })
    .await?;
    let client = client(config)?;
    let watched = &mut [&mut etcd, &mut apiserver];
    wait_until("kube-apiserver to be ready", timeout, watched, || {
        readyz(&client)
    })
    .await?;
    let namespaces: Api<Namespace> = Api::all(client);
    wait_until("the default namespace", timeout, watched, || {
        exists(&namespaces, "default")
    })
    .await?;
    Ok((etcd, apiserver))
}

fn client(config: &kube::Config) -> Result<kube::Client> {
    kube::Client::try_from(config.clone()).map_err(crate::error::kube("build a kube client"))
}

async fn readyz(client: &kube::Client) -> bool {
    match http::Request::get("/readyz").body(Vec::new()) {
        Ok(request) => client
            .request_text(request)
            .await
            .is_ok_and(|body| body.trim() == "ok"),
        Err(_) => false,
    }
}

async fn exists<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    matches!(api.get_opt(name).await, Ok(Some(_)))
}
