//! `ocifit run`: the controller (leader-elected), the webhook (every replica, when it has a
//! certificate) and the admin HTTP server in one process behind one shutdown signal. Ready once
//! the stores synced and, when the webhook is served, its index is built and a certificate
//! loaded. SIGTERM or SIGINT: readiness drops, the controller stops taking work and finishes
//! in-flight reconciles and writes, the lease is released, the webhook answers its in-flight
//! requests and stops, the admin server stops, exit 0. Every setting is a flag with an
//! environment variable.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use prometheus_client::encoding::EncodeMetric;
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use tokio::sync::watch;

mod args;
mod webhook;

pub use args::{CertificateSource, RunArgs};

use crate::controller::context::Settings;
use crate::controller::leader::{self, Leadership, LeaseSettings};
use crate::controller::registry_source::RegistrySource;
use crate::controller::runner::{Parts, controller};
use crate::controller::schedule::Backoff;
use crate::registry::{AllowList, CacheOptions, DockerConfig, RegistryOptions};
use crate::telemetry::{Metrics, Readiness, admin_server, init_logs};
use webhook::{WebhookParts, serve_webhook};

/// Runs until SIGTERM or SIGINT; exit 0 after a clean shutdown.
pub async fn run(args: RunArgs) -> ExitCode {
    if let Err(err) = init_logs(args.log_format) {
        eprintln!("error: {err:#}");
        return ExitCode::from(2);
    }
    match serve(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "ocifit run failed");
            ExitCode::from(1)
        }
    }
}

/// One signal for every part of the process.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Resolves once shutdown has begun.
    pub async fn wait(mut self) {
        // An error means the sender is gone, which only happens at exit.
        let _ = self.0.wait_for(|down| *down).await;
    }
}

async fn serve(args: RunArgs) -> anyhow::Result<()> {
    // kube and the registry client share ring; installing it first avoids picking at runtime.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = kube_client(args.kubeconfig.as_deref()).await?;
    let source = Arc::new(
        RegistrySource::new(registry_options(&args)?)
            .context("failed to build the registry client")?,
    );
    let scrape_source = Arc::clone(&source);
    let metrics = Metrics::new(Some(Box::new(move |encoder| {
        let stats = scrape_source.stats();
        let mut requests = encoder.encode_descriptor(
            "registry_requests",
            "HTTP requests made to registries, by outcome: the answer's status class (2xx, 3xx, 4xx, 5xx) or error (no answer)",
            None,
            MetricType::Counter,
        )?;
        for (outcome, value) in stats.outcomes.labelled() {
            ConstCounter::new(value).encode(requests.encode_family(&[("outcome", outcome)])?)?;
        }
        for (name, help, value) in [
            (
                "registry_content_cache_hits",
                "Manifests and blobs served from the cache (by digest)",
                stats.content.hits,
            ),
            (
                "registry_content_cache_misses",
                "Manifests and blobs fetched from a registry",
                stats.content.misses,
            ),
            (
                "registry_tag_cache_hits",
                "Tag resolutions served from the cache",
                stats.tags.hits,
            ),
            (
                "registry_tag_cache_misses",
                "Tag resolutions asked of a registry",
                stats.tags.misses,
            ),
        ] {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        let mut lookups = encoder.encode_descriptor(
            "registry_lookups",
            "Registry lookups by what they were for (artifact, platforms, candidate_artifact) and outcome (ok or the error kind)",
            None,
            MetricType::Counter,
        )?;
        for ((lookup, outcome), value) in scrape_source.outcomes() {
            let labels = [("lookup", lookup.as_str()), ("outcome", outcome)];
            ConstCounter::new(value).encode(lookups.encode_family(&labels)?)?;
        }
        Ok(())
    })));
    let identity = match args.identity.clone() {
        Some(identity) => identity,
        None => hostname(),
    };
    let (leadership, leader_task) = if args.leader_elect {
        leader::elect(
            client.clone(),
            LeaseSettings {
                name: args.lease_name.clone(),
                namespace: args.lease_namespace.clone(),
                identity: identity.clone(),
                duration: args.lease_duration,
                grace: args.lease_grace,
            },
            Arc::clone(&metrics),
        )
        .await?
    } else {
        metrics.set_leader(true);
        Leadership::always()
    };

    let (stop, stopped) = watch::channel(false);
    let shutdown = Shutdown(stopped);
    let settings = Settings {
        nfd_namespace: args.nfd_namespace.clone(),
        backoff: Backoff {
            max: args.max_retry_interval,
            ..Backoff::default()
        },
        debounce: args.debounce,
        concurrency: args.concurrency,
        nfd_discovery_interval: args.nfd_discovery_interval,
    };
    let events_client = client.clone();
    let webhook_leadership = leadership.clone();
    let (stores, run_controller) = controller(
        Parts {
            client,
            source,
            leadership,
            metrics: Arc::clone(&metrics),
            settings,
            identity: identity.clone(),
        },
        shutdown.clone().wait(),
    );
    let webhook = serve_webhook(
        &args,
        WebhookParts {
            client: events_client,
            leadership: webhook_leadership,
            identity,
            stores: stores.clone(),
            metrics: Arc::clone(&metrics),
        },
    )?;

    let readiness = Readiness::default();
    let admin = admin_server(
        args.admin_bind_address,
        Arc::clone(&metrics),
        readiness.clone(),
    )
    .with_context(|| {
        format!(
            "failed to bind the admin server to {}",
            args.admin_bind_address
        )
    })?;
    let admin_handle = admin.handle();
    let admin_task = tokio::spawn(admin);
    tracing::info!(address = %args.admin_bind_address, "admin server listening");

    let ready_task = {
        let readiness = readiness.clone();
        let stores = stores.clone();
        let webhook = webhook
            .as_ref()
            .map(|w| (w.index.clone(), Arc::clone(&w.cert)));
        tokio::spawn(async move {
            // A store's readiness wakes only its last waiter (the controller also waits on the
            // policy store), so look again now and then rather than once.
            let synced = async {
                stores.policies.wait_until_ready().await.is_ok()
                    && stores.nodes.wait_until_ready().await.is_ok()
            };
            let mut synced = std::pin::pin!(synced);
            let ok = loop {
                if let Ok(ok) = tokio::time::timeout(Duration::from_millis(100), &mut synced).await
                {
                    break ok;
                }
            };
            if !ok {
                return;
            }
            tracing::info!("caches synced");
            if let Some((index, cert)) = webhook {
                while !(index.is_built() && cert.is_loaded()) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                tracing::info!("webhook index built and certificate loaded");
            }
            readiness.set(true);
            tracing::info!("ready");
        })
    };
    let signals = tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: finishing in-flight reconciles");
        let _ = stop.send(true);
    });

    let controller_task = tokio::spawn(run_controller);
    let mut stopping = shutdown.clone();
    let webhook_ended = async {
        match &webhook {
            Some(webhook) => webhook.stopped.clone().wait().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = stopping.0.wait_for(|down| *down) => {}
        ended = admin_task => {
            anyhow::bail!("the admin server stopped unexpectedly: {ended:?}");
        }
        () = webhook_ended => {
            anyhow::bail!("the webhook server stopped unexpectedly");
        }
    }
    readiness.set(false);
    ready_task.abort();
    if let Err(err) = controller_task.await {
        tracing::warn!(error = %err, "the controller ended abnormally");
    }
    leader_task.release().await;
    if let Some(webhook) = webhook {
        webhook.stop().await;
    }
    admin_handle.stop(true).await;
    signals.abort();
    tracing::info!("stopped");
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
}

async fn kube_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("failed to read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("failed to use the kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("failed to find a cluster: no $KUBECONFIG, ~/.kube/config or in-cluster service account")?,
    };
    kube::Client::try_from(config).context("failed to build the Kubernetes client")
}

fn registry_options(args: &RunArgs) -> anyhow::Result<RegistryOptions> {
    let mut options = RegistryOptions {
        plain_http: args.plain_http_registries.clone(),
        allowed: AllowList::parse(&args.allowed_registries).context("--allowed-registries")?,
        request_timeout: args.registry_timeout,
        max_artifact_bytes: args.max_artifact_bytes,
        cache: CacheOptions {
            tag_ttl: args.registry_tag_ttl,
            ..CacheOptions::default()
        },
        ..RegistryOptions::default()
    };
    if let Some(path) = &args.docker_config {
        let bytes = std::fs::read(path)
            .with_context(|| format!("failed to read the docker config {}", path.display()))?;
        options.credentials = DockerConfig::from_json(&bytes)
            .with_context(|| format!("failed to parse the docker config {}", path.display()))?;
    }
    if let Some(path) = &args.ca_file {
        let pem = std::fs::read(path)
            .with_context(|| format!("failed to read the CA file {}", path.display()))?;
        options.extra_ca_pem.push(pem);
    }
    Ok(options)
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| format!("ocifit-{}", std::process::id()))
}
