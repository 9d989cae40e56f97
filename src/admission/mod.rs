//! The admission host: one HTTPS server for every feature's admission route (`route`), with
//! TLS and certificate reload (`tls`), the managed certificates (`certificates`), body caps and
//! deadlines (`server`), review decoding and response encoding (`review`, `patch`), and the
//! admission metrics. A new feature adds a planner and a route to the list `ocifit run` hands
//! [`serve`], not a server. The host writes to the apiserver only, in the managed mode, its own
//! Secret, Events on it and its webhook configuration's caBundle; it never reaches a registry.

mod certificates;
mod patch;
mod request;
mod review;
mod route;
mod server;
mod tls;
pub use certificates::{
    CertificateAction, CertificateSettings, CertificateSink, StoredCertificates,
    manage_certificates, plan_certificates, service_dns_names,
};
pub use patch::{JsonText, WriteJson, WrittenPatch, add_op, remove_op, replace_op};
pub(crate) use request::read_as;
pub use request::{ReadMetadata, Request};
#[cfg(test)]
pub(crate) use review::tests as review_fixtures;
pub use review::{Answer, MAX_ARRAY_ELEMENTS, MAX_BODY_BYTES, read_review};
pub use route::{Planner, Response, Route, Undecided, Verdict};
pub use server::{DEADLINE, Host, admission_server};
pub use tls::{ServingCert, TlsError, Uncertified};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::watch;

use crate::process::{Shutdown, Tasks, until};
use crate::telemetry::Metrics;
use server::ServerError;
use tls::CertFiles;

/// Where the serving certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertificateSource {
    /// PEM files, re-read when they change.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key.
        key: PathBuf,
    },
    /// Issued and kept by the operator itself.
    Managed(certificates::CertificateSettings),
}

/// How the host serves.
#[derive(Clone, Debug)]
pub struct HostSettings {
    /// The HTTPS address.
    pub bind: SocketAddr,
    /// The serving certificate's source.
    pub certificates: CertificateSource,
    /// The per-request deadline (normally [`server::DEADLINE`]).
    pub deadline: Duration,
    /// How long the host keeps answering once the process stops, before it drains: the endpoints
    /// of a stopping replica go only once its failed readiness is seen, and the apiserver does
    /// not retry a refused connection. Meanwhile every answer closes its connection.
    pub shutdown_delay: Duration,
    /// PEM CA certificates a client must present a certificate signed by (the apiserver's,
    /// from its admission configuration); `None`: any client that reaches the port is served.
    pub client_ca: Option<Vec<u8>>,
    /// With a client CA, what a client without a certificate gets.
    pub uncertified: tls::Uncertified,
}

/// The host, serving.
pub struct Running {
    /// The serving certificate (readiness waits until one is loaded).
    pub cert: Arc<ServingCert>,
    /// Its long-lived tasks, by name: the server (once `shutdown` resolves it keeps serving
    /// for [`HostSettings::shutdown_delay`], then answers in-flight requests and ends) and the
    /// certificate's source (ends with `shutdown`).
    pub tasks: Tasks,
}

/// Binds the host for `routes`. `leading` (whether this replica leads) gates the managed
/// certificates' writes; `client` is needed by them only.
pub fn serve(
    settings: HostSettings,
    routes: Vec<Route>,
    metrics: Arc<Metrics>,
    client: kube::Client,
    leading: watch::Receiver<bool>,
    shutdown: Shutdown,
) -> Result<Running, ServerError> {
    let cert = ServingCert::reporting(Arc::clone(&metrics));
    let (name, source): (&'static str, BoxFuture<'static, ()>) = match settings.certificates {
        CertificateSource::Files { cert: chain, key } => (
            "certificate files",
            CertFiles { cert: chain, key }
                .watch(Arc::clone(&cert), tls::POLL_INTERVAL)
                .boxed(),
        ),
        CertificateSource::Managed(managed) => (
            "managed certificates",
            certificates::manage_certificates(
                client,
                managed,
                leading,
                Arc::clone(&cert) as Arc<dyn CertificateSink>,
                std::future::pending(),
            )
            .boxed(),
        ),
    };
    let source = until(shutdown.clone(), source);
    let delay = settings.shutdown_delay;
    let draining = Arc::new(AtomicBool::new(false));
    let drain = Arc::clone(&draining);
    let shutdown = async move {
        shutdown.wait().await;
        tracing::info!(?delay, "the admission server keeps serving, then drains");
        // From now on every answer closes its connection: the apiserver's next request opens a
        // new one, to a replica that stays once our endpoint is gone, instead of reusing one we
        // close when the delay ends.
        drain.store(true, Ordering::Relaxed);
        tokio::time::sleep(delay).await;
    };
    let (server, address) = admission_server(
        settings.bind,
        Arc::clone(&cert),
        Host {
            routes,
            metrics,
            deadline: settings.deadline,
            draining,
            client_ca: settings.client_ca,
            uncertified: settings.uncertified,
        },
    )?;
    let handle = server.handle();
    let serving = async move {
        let mut server = std::pin::pin!(server);
        tokio::select! {
            result = &mut server => {
                if let Err(err) = result {
                    tracing::error!(error = %err, "the admission server failed");
                }
            }
            () = shutdown => {
                // Stops accepting, answers in-flight requests, then the server's own future
                // ends. The server takes the stop command only while it is polled: both at once.
                let (_, _) = tokio::join!(handle.stop(true), server);
            }
        }
    };
    tracing::info!(%address, "admission server listening");
    Ok(Running {
        cert,
        tasks: vec![("admission server", serving.boxed()), (name, source)],
    })
}
