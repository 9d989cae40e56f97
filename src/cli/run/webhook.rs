//! The webhook's part of `ocifit run`: its certificate source (files re-read when they change, or
//! the managed mode), the index fed from the controller's stores, the Event publisher and the
//! HTTPS server, started together and stopped together. It decides nothing about pods.

use std::sync::Arc;

use tokio::sync::watch;

use super::{CertificateSource, RunArgs, Shutdown};
use crate::controller::context::Stores;
use crate::controller::leader::Leadership;
use crate::telemetry::Metrics;
use crate::webhook::certificates::{self, CertificateSink};
use crate::webhook::events;
use crate::webhook::feed::{self, SharedIndex};
use crate::webhook::server::{DEADLINE, Webhook, webhook_server};
use crate::webhook::tls::{self, CertFiles, ServingCert};

/// What the webhook needs from the rest of the process.
pub(super) struct WebhookParts {
    pub(super) client: kube::Client,
    pub(super) leadership: Leadership,
    pub(super) identity: String,
    pub(super) stores: Stores,
    pub(super) metrics: Arc<Metrics>,
}

/// The running webhook and the tasks that feed it.
pub(super) struct RunningWebhook {
    pub(super) cert: Arc<ServingCert>,
    pub(super) index: SharedIndex,
    handle: actix_web::dev::ServerHandle,
    pub(super) stopped: Shutdown,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningWebhook {
    /// Answers in-flight requests, then stops the server and the tasks feeding it.
    pub(super) async fn stop(self) {
        self.handle.stop(true).await;
        for task in self.tasks {
            task.abort();
        }
    }
}

/// Starts the webhook when the flags give it a certificate source; otherwise says how to.
pub(super) fn serve_webhook(
    args: &RunArgs,
    parts: WebhookParts,
) -> anyhow::Result<Option<RunningWebhook>> {
    let Some(source) = args.certificate_source() else {
        tracing::warn!(
            "the webhook is not served: no certificate; give --tls-cert-file and --tls-key-file \
             (or OCIFIT_TLS_CERT_FILE/OCIFIT_TLS_KEY_FILE), or --manage-webhook-certificate"
        );
        return Ok(None);
    };
    let cert = ServingCert::new();
    let mut tasks = Vec::new();
    match source {
        CertificateSource::Files {
            cert: cert_file,
            key,
        } => {
            let files = CertFiles {
                cert: cert_file,
                key,
            };
            tasks.push(tokio::spawn(
                files.watch(Arc::clone(&cert), tls::POLL_INTERVAL),
            ));
        }
        CertificateSource::Managed => {
            let mut settings = certificates::Settings::new(
                &args.lease_namespace,
                &args.webhook_secret,
                &args.webhook_service,
                &args.webhook_configuration,
            );
            settings.identity = parts.identity.clone();
            tasks.push(tokio::spawn(certificates::manage(
                parts.client.clone(),
                settings,
                parts.leadership,
                Arc::clone(&cert) as Arc<dyn CertificateSink>,
                // Stopped with the webhook's other tasks.
                std::future::pending(),
            )));
        }
    }
    let index = SharedIndex::default();
    tasks.push(tokio::spawn(feed::feed(
        parts.stores,
        args.nfd_namespace.clone(),
        index.clone(),
        Arc::clone(&parts.metrics),
    )));
    let (notices, publisher) =
        events::publisher(parts.client, parts.identity, Arc::clone(&parts.metrics));
    tasks.push(tokio::spawn(publisher));
    let (server, address) = webhook_server(
        args.webhook_bind_address,
        Arc::clone(&cert),
        Webhook {
            index: index.clone(),
            metrics: parts.metrics,
            notices: Some(notices),
            deadline: DEADLINE,
        },
    )?;
    let handle = server.handle();
    let (done, stopped) = watch::channel(false);
    tokio::spawn(async move {
        if let Err(err) = server.await {
            tracing::error!(error = %err, "the webhook server failed");
        }
        let _ = done.send(true);
    });
    tracing::info!(%address, "webhook listening");
    Ok(Some(RunningWebhook {
        cert,
        index,
        handle,
        stopped: Shutdown(stopped),
        tasks,
    }))
}
