//! Starting a cluster: look up every executable, mint and write credentials, start etcd and
//! kube-apiserver (and a registry alongside), then the controllers, then the real nodes, waiting for
//! each to be ready.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Api;

use super::components::{self, Credentials, Files, Listen, Ports};
use super::{Cluster, ClusterBuilder, StartupTimes, client, kubeconfig};
use crate::error::{Error, Result, io};
use crate::net::{free_port, free_port_on, host_ipv4, http_status};
use crate::node::{self, NodeEnv, RunningNode};
use crate::pki::install_crypto_provider;
use crate::process::{Process, wait_until};
use crate::registry::Registry;
use crate::tools::{Tool, Tools};
use crate::workdir::Workdir;

impl ClusterBuilder {
    /// Starts the cluster and waits until it is ready.
    pub async fn start(self) -> Result<Cluster> {
        let started = Instant::now();
        install_crypto_provider();
        let tools = Tools::locate()?;
        let executables = Executables::locate(&self, &tools)?;

        let workdir = Workdir::create("cluster-")?;
        let logs = workdir.join("logs");
        std::fs::create_dir_all(&logs).map_err(io("create directory", &logs))?;
        let listen = if self.real_nodes.is_empty() {
            Listen::Loopback
        } else {
            Listen::Host(host_ipv4()?)
        };
        let credentials = Credentials::mint(listen)?;
        let files = credentials.write(workdir.path())?;
        let ports = Ports {
            etcd_client: free_port()?,
            etcd_peer: free_port()?,
            apiserver: free_port_on(listen.address())?,
        };
        let server = format!("https://{}:{}", listen.address(), ports.apiserver);
        let kubeconfig_yaml =
            kubeconfig::render(&server, credentials.ca.cert_pem(), &credentials.admin)?;
        std::fs::write(&files.kubeconfig, &kubeconfig_yaml)
            .map_err(io("write", &files.kubeconfig))?;
        let config = kubeconfig::load(&kubeconfig_yaml).await?;

        // The registry needs nothing from the cluster, so it starts alongside.
        let timeout = self.timeout;
        let registry = async {
            match self.registry {
                Some(registry) => registry.listen_on(listen.address()).start().await.map(Some),
                None => Ok(None),
            }
        };
        let control_plane = async {
            let etcd = Process::spawn(
                "etcd",
                &executables.etcd,
                components::etcd(&workdir.join("etcd"), ports),
                &logs,
            )?;
            let apiserver = Process::spawn(
                "kube-apiserver",
                &executables.apiserver,
                components::apiserver(&files, ports, listen)
                    .into_iter()
                    .chain(self.apiserver_args.iter().cloned())
                    .collect::<Vec<_>>(),
                &logs,
            )?;
            wait_for_control_plane(etcd, apiserver, &config, ports, timeout).await
        };
        let ((mut etcd, mut apiserver), registry) = tokio::try_join!(control_plane, registry)?;
        let control_plane_time = started.elapsed();

        let since = Instant::now();
        let mut controllers = executables.start_controllers(&files, &logs, listen)?;
        let controllers_time = if controllers.is_empty() {
            None
        } else {
            let mut watched: Vec<&mut Process> = controllers
                .iter_mut()
                .chain([&mut apiserver, &mut etcd])
                .collect();
            let probe_account = executables.controller_manager.is_some();
            wait_for_controllers(&mut watched, probe_account, &config, timeout).await?;
            Some(since.elapsed())
        };

        let since = Instant::now();
        let mut nodes: Vec<RunningNode> = Vec::new();
        let env = NodeEnv {
            ca: &credentials.ca,
            server: &server,
            registry: registry.as_ref().map(Registry::addr),
            logs: &logs,
            tools: &tools,
            timeout,
        };
        let admin = client(&config)?;
        for spec in &self.real_nodes {
            nodes.push(node::start(spec, &env, &admin).await?);
        }
        let nodes_time = (!nodes.is_empty()).then(|| since.elapsed());

        Ok(Cluster {
            nodes,
            controllers,
            apiserver,
            etcd,
            startup: StartupTimes {
                control_plane: control_plane_time,
                controllers: controllers_time,
                registry: registry.as_ref().map(Registry::startup_time),
                real_nodes: nodes_time,
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

/// The executables a start needs, looked up before anything starts so a missing one fails at once.
struct Executables {
    etcd: PathBuf,
    apiserver: PathBuf,
    controller_manager: Option<PathBuf>,
    scheduler: Option<PathBuf>,
    kwok: Option<(PathBuf, Vec<PathBuf>)>,
}

impl Cluster {
    /// Kills kube-apiserver with SIGKILL, as a crash would (etcd keeps the cluster's state).
    pub fn kill_apiserver(&mut self) {
        self.apiserver.kill();
    }

    /// Starts kube-apiserver again with its flags, and waits until it is ready.
    pub async fn start_apiserver_again(&mut self, timeout: Duration) -> Result<()> {
        self.apiserver.start_again()?;
        let client = client(&self.config)?;
        wait_until(
            "kube-apiserver to be ready again",
            timeout,
            &mut [&mut self.apiserver],
            || readyz(&client),
        )
        .await
    }
}

impl Executables {
    fn locate(builder: &ClusterBuilder, tools: &Tools) -> Result<Self> {
        // kubectl is not started, but `Cluster::kubectl` needs it; a real node's tools are looked up
        // here too, so a missing one fails before anything starts.
        tools.path(Tool::Kubectl)?;
        if !builder.real_nodes.is_empty() {
            for tool in [Tool::Kubelet, Tool::KubeProxy, Tool::Pause] {
                tools.path(tool)?;
            }
        }
        let optional = |wanted: bool, tool| wanted.then(|| tools.path(tool)).transpose();
        Ok(Self {
            etcd: tools.path(Tool::Etcd)?,
            apiserver: tools.path(Tool::KubeApiserver)?,
            controller_manager: optional(builder.controller_manager, Tool::KubeControllerManager)?,
            scheduler: optional(builder.scheduler, Tool::KubeScheduler)?,
            kwok: builder
                .kwok
                .then(|| Ok::<_, Error>((tools.path(Tool::Kwok)?, tools.kwok_stages()?)))
                .transpose()?,
        })
    }

    /// Starts the controllers asked for, in the order they are dropped (killed) later.
    fn start_controllers(
        &self,
        files: &Files,
        logs: &Path,
        listen: Listen,
    ) -> Result<Vec<Process>> {
        let mut started = Vec::new();
        if let Some(program) = &self.controller_manager {
            let args = components::controller_manager(files);
            started.push(Process::spawn(
                "kube-controller-manager",
                program,
                args,
                logs,
            )?);
        }
        if let Some(program) = &self.scheduler {
            let args = components::scheduler(files);
            started.push(Process::spawn("kube-scheduler", program, args, logs)?);
        }
        if let Some((program, stages)) = &self.kwok {
            let args = components::kwok(files, stages, listen);
            started.push(Process::spawn("kwok", program, args, logs)?);
        }
        Ok(started)
    }
}

/// The controller-manager proves itself by creating the default ServiceAccount; the scheduler and
/// kwok offer nothing to probe, so they only have to keep running.
async fn wait_for_controllers(
    watched: &mut [&mut Process],
    probe_account: bool,
    config: &kube::Config,
    timeout: Duration,
) -> Result<()> {
    let default_account: Api<ServiceAccount> = Api::namespaced(client(config)?, "default");
    let what = if probe_account {
        "kube-controller-manager to create the default ServiceAccount"
    } else {
        "the controllers to start"
    };
    wait_until(what, timeout, watched, || async {
        !probe_account || exists(&default_account, "default").await
    })
    .await
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
