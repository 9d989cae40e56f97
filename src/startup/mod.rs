//! `ocifit run`: the configuration read once (`config`), the cluster view, every feature's `run`
//! and the admission host composed into one process, its tasks supervised (`supervise`), and the
//! admin HTTP server. Ready once the stores synced and, when admission is served, its index is
//! built and a certificate loaded. SIGTERM or SIGINT: readiness drops, admission keeps serving for
//! its shutdown delay (so endpoints drop the replica first), tasks finish what is in flight, the
//! lease is released, exit 0. A task that ends or panics first: liveness and readiness fail, the
//! others stop, the lease is released, exit 1, and the log names the task. A missing prerequisite
//! (the CRD, the Lease's namespace) is one line naming the fix.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures_util::future::BoxFuture;
use kube::Resource as _;

mod args;
mod config;
mod kube_access;
mod scrape;
mod supervise;
pub use supervise::Ended;

pub use args::RunArgs;
pub use config::Config;
pub use kube_access::{KubeArgs, kube_client};

use crate::admission::{self, Route};
use crate::api::{ArtifactCache, GROUP, ImageSelectionPolicy, PlacementPolicy};
use crate::cluster::ClusterView;
use crate::cluster::{LeaderTask, Leadership, LeaseSettings};
use crate::image_selection::{self, RegistrySource};
use crate::process::{Feature, Readiness, Shutdown, Tasks};
use crate::registry::{DockerConfig, InspectorOptions, RegistryOptions};
use crate::telemetry::{Health, Metrics, admin_server, init_logs};
use crate::{artifact_cache, placement};
use supervise::{GRACE, supervise};

/// Runs until SIGTERM or SIGINT; exit 0 after a clean shutdown, 1 when a task failed or the
/// process could not start, 2 for unusable flags or files.
pub async fn run(mut args: RunArgs) -> ExitCode {
    if let Err(err) = init_logs(args.log_format) {
        eprintln!("error: {err:#}");
        return ExitCode::from(2);
    }
    let deprecated = std::env::var_os(kube_access::DEPRECATED_VARIABLE);
    let (kubeconfig, read) =
        kube_access::with_deprecated(args.kube.kubeconfig.take(), deprecated.as_deref());
    args.kube.kubeconfig = kubeconfig;
    if read {
        tracing::warn!(
            "{} is deprecated and goes in the next release: use --kubeconfig or $KUBECONFIG",
            kube_access::DEPRECATED_VARIABLE
        );
    }
    let config = match Config::from_args(&args) {
        Ok(config) => config,
        Err(err) => {
            tracing::error!(error = %crate::telemetry::error_chain(&err), "unusable configuration");
            return ExitCode::from(2);
        }
    };
    match serve(config).await {
        Ok(Ended::Stopped) => ExitCode::SUCCESS,
        Ok(Ended::Failed { .. }) => ExitCode::from(1),
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "ocifit run failed");
            ExitCode::from(1)
        }
    }
}

/// The process, composed: what `run` supervises and how it stops.
pub struct Process {
    /// Every long-lived task, by name.
    pub tasks: Tasks,
    /// Liveness and readiness, as `/livez` and `/readyz` serve them.
    pub health: Health,
    /// Begins shutdown for every task.
    stop: tokio::sync::watch::Sender<bool>,
    /// Resolves once the node store and every feature's stores hold a first list.
    synced: BoxFuture<'static, ()>,
    /// Whether the process can serve now (the node store and every feature ready, a
    /// certificate loaded when the admission host serves).
    ready: Box<dyn Fn() -> bool + Send + Sync>,
    lease: LeaderTask,
    admin: actix_web::dev::ServerHandle,
    /// How long tasks get to finish once shutdown begins: [`GRACE`], plus the admission
    /// host's shutdown delay while it keeps serving.
    grace: Duration,
}

impl Process {
    /// Supervises the tasks until `signal` or a failure, then releases the lease and stops the
    /// admin server.
    pub async fn supervise(self, signal: impl Future<Output = ()>) -> Ended {
        let Process {
            tasks,
            health,
            stop,
            synced,
            ready,
            lease,
            admin,
            grace,
        } = self;
        let report = tokio::spawn(report_readiness(synced, ready, health.clone()));
        let ended = supervise(tasks, &stop, &health, signal, grace).await;
        report.abort();
        lease.release().await;
        admin.stop(true).await;
        tracing::info!("stopped");
        ended
    }
}

async fn serve(config: Config) -> anyhow::Result<Ended> {
    let process = start(config).await?;
    Ok(process.supervise(wait_for_signal()).await)
}

/// Every metric `ocifit run` serves: the registered ones, and `source`'s registry counters and
/// the allocator's figures, read at scrape time.
pub fn process_metrics(source: &Arc<RegistrySource>) -> Arc<Metrics> {
    Metrics::new(Some(scrape::scraped(Arc::clone(source))))
}

/// Composes the process from `config`: checks the prerequisites, elects (or not), builds the
/// cluster view, runs every feature, serves the admission host when any feature has a route,
/// and binds the admin server.
pub async fn start(config: Config) -> anyhow::Result<Process> {
    // kube and the registry client share ring; installing it first avoids picking at runtime.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = kube_client(&config.kube).await?;
    require_crd(&client).await?;
    if config.every_private_registry {
        tracing::warn!(
            "--placement-allow-private-registries is deprecated and allows every private, \
             loopback and link-local address; name the registries with \
             --allowed-private-registries instead"
        );
    }
    let source = Arc::new(
        RegistrySource::new(config.registry.clone())
            .context("failed to build the registry client")?,
    );
    let metrics = process_metrics(&source);
    let (leadership, lease) = elect(&client, config.lease.as_ref(), &metrics).await?;
    let (stop, shutdown) = Shutdown::new();
    let (cluster, mut tasks) = ClusterView::watch(
        client.clone(),
        leadership.clone(),
        config.cluster.clone(),
        shutdown.clone(),
    );
    if config.admission.is_none() {
        tracing::warn!(
            "the webhook is not served: no certificate; give --tls-cert-file and --tls-key-file \
             (or OCIFIT_TLS_CERT_FILE/OCIFIT_TLS_KEY_FILE), or --manage-webhook-certificate"
        );
    }
    let features = run_features(&config, &cluster, source, &metrics, &shutdown);
    let (nodes, synced_nodes) = (cluster.nodes.clone(), cluster.nodes.clone());
    let mut readiness = vec![Readiness::new(
        async move { synced_nodes.wait_synced().await },
        move || nodes.synced(),
    )];
    let mut routes = Vec::new();
    for feature in features {
        tasks.extend(feature.tasks);
        routes.extend(feature.routes);
        readiness.push(feature.readiness);
    }
    let grace = GRACE
        + config
            .admission
            .as_ref()
            .map_or(Duration::ZERO, |a| a.shutdown_delay);
    let cert = match &config.admission {
        Some(settings) if !routes.is_empty() => {
            let running = admission::serve(
                settings.clone(),
                routes,
                Arc::clone(&metrics),
                client,
                leadership.watch(),
                shutdown.clone(),
            )?;
            tasks.extend(running.tasks);
            Some(running.cert)
        }
        _ => None,
    };
    readiness.push(Readiness::new(async {}, move || {
        cert.as_ref().is_none_or(|c| c.is_loaded())
    }));
    let (synced, ready) = Readiness::all(readiness).into_parts();
    let health = Health::default();
    let admin = admin_server(config.admin, Arc::clone(&metrics), health.clone())
        .with_context(|| format!("failed to bind the admin server to {}", config.admin))?;
    let admin_handle = admin.handle();
    // The server runs on its own task: once shutdown begins, its supervised task ends while it
    // keeps answering /readyz (503) and /livez until `Process::supervise` stops it last.
    let admin = tokio::spawn(admin);
    let stopping = shutdown.clone();
    tasks.push((
        "admin server",
        Box::pin(async move {
            tokio::select! {
                joined = admin => match joined {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => tracing::error!(error = %err, "the admin server failed"),
                    Err(err) => tracing::error!(error = %err, "the admin server panicked"),
                },
                () = stopping.wait() => {}
            }
        }),
    ));
    tracing::info!(address = %config.admin, "admin server listening");
    Ok(Process {
        tasks,
        health,
        stop,
        synced,
        ready,
        lease,
        admin: admin_handle,
        grace,
    })
}

/// Elects with `lease` (or leads alone without one); a missing namespace or Lease is one line
/// Image selection, placement and the artifact cache, in that order (the order of their tasks in
/// the supervisor's list).
fn run_features(
    config: &Config,
    cluster: &ClusterView,
    source: Arc<RegistrySource>,
    metrics: &Arc<Metrics>,
    shutdown: &Shutdown,
) -> [Feature<Route>; 3] {
    [
        image_selection::run(image_selection::ImageSelectionDeps {
            cluster: cluster.clone(),
            source,
            metrics: Arc::clone(metrics),
            settings: config.controller.clone(),
            hold: config.hold,
            identity: config.identity.clone(),
            admission: config.admission.is_some(),
            webhook_configuration: config.webhook_configuration.clone(),
            own_namespace: config.own_namespace.clone(),
            shutdown: shutdown.clone(),
        }),
        placement::run(placement::PlacementDeps {
            cluster: cluster.clone(),
            metrics: Arc::clone(metrics),
            identity: config.identity.clone(),
            own_namespace: config.own_namespace.clone(),
            // Credentials come with each lookup (the pod's Secrets, then ocifit's own).
            inspector: InspectorOptions {
                registry: RegistryOptions {
                    credentials: DockerConfig::default(),
                    ..config.registry.clone()
                },
                ..InspectorOptions::default()
            },
            own_credentials: config.placement_credentials.clone(),
            admission: config.admission.is_some(),
            audit_interval: config.placement_audit_interval,
            shutdown: shutdown.clone(),
        }),
        artifact_cache::run(artifact_cache::ArtifactCacheDeps {
            cluster: cluster.clone(),
            metrics: Arc::clone(metrics),
            identity: config.identity.clone(),
            helper: config.artifact_helper.clone(),
            registries: config.step_registries.clone(),
            settings: artifact_cache::CacheControllerSettings {
                own_namespace: config.own_namespace.clone(),
                images: config.artifact_cache_images.clone(),
            },
            // The hold bound and failure rule every ocifit hold shares.
            hold: artifact_cache::HoldRules {
                bound: config.hold.bound,
                failure: config.hold.failure,
            },
            shutdown: shutdown.clone(),
        }),
    ]
}

/// naming the fix.
async fn elect(
    client: &kube::Client,
    lease: Option<&LeaseSettings>,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<(Leadership, LeaderTask)> {
    Ok(match lease {
        Some(settings) => crate::cluster::elect(
            client.clone(),
            settings.clone(),
            Arc::clone(metrics),
        )
        .await
        .map_err(|err| {
            if err.namespace_missing() {
                anyhow::anyhow!(
                    "the namespace {} of the leader-election Lease does not exist: create it \
                         (kubectl create namespace {}), or run in an existing one \
                         (--lease-namespace, POD_NAMESPACE)",
                    settings.namespace,
                    settings.namespace
                )
            } else if err.lease_missing() {
                anyhow::anyhow!(
                    "the leader-election Lease {}/{} does not exist and this replica may not \
                         create it: apply config/rbac/leader_election_lease.yaml (the chart \
                         creates it), or turn leader election off (--leader-elect=false)",
                    settings.namespace,
                    settings.name
                )
            } else {
                anyhow::Error::new(err)
            }
        })?,
        None => {
            metrics.set_leader(true);
            Leadership::always()
        }
    })
}

/// Logs when the caches synced, then marks `health` ready once `ready` holds (polled while
/// starting only; shutdown or a failure turns it off again).
async fn report_readiness(
    synced: impl Future<Output = ()>,
    ready: Box<dyn Fn() -> bool + Send + Sync>,
    health: Health,
) {
    synced.await;
    tracing::info!("caches synced");
    while !ready() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    health.set_ready(true);
    tracing::info!("ready");
}

/// ocifit's CRDs must be installed: without them their watches could only fail.
async fn require_crd(client: &kube::Client) -> anyhow::Result<()> {
    let version = format!("{GROUP}/v1alpha1");
    let served: Vec<String> = client
        .list_api_group_resources(&version)
        .await
        .map(|list| list.resources.into_iter().map(|r| r.name).collect())
        .unwrap_or_default();
    for (kind, plural) in [
        ("ImageSelectionPolicy", ImageSelectionPolicy::plural(&())),
        ("PlacementPolicy", PlacementPolicy::plural(&())),
        ("ArtifactCache", ArtifactCache::plural(&())),
    ] {
        anyhow::ensure!(
            served.iter().any(|name| *name == plural),
            "the {kind} CRD ({version}) is not installed: apply it (ocifit crd | kubectl apply \
             -f -, or install the chart)"
        );
    }
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGTERM; only SIGINT stops the process");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tracing::info!("shutting down: finishing in-flight work");
}
