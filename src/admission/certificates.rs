//! Managed TLS for the webhook: the operator keeps its own CA and serving certificate in a
//! `kubernetes.io/tls` Secret (`ca.crt`, `ca.key`, `tls.crt`, `tls.key`) and keeps the CA in the
//! `caBundle` of its MutatingWebhookConfiguration. The decision (keep, reissue, rotate, start
//! over) is pure, in [`plan_certificates()`]; minting is [`CertificatePlan::carry_out`]. The adapters (`secret`,
//! [`manage_certificates`]) write only as leader and read on every replica. It must not serve
//! HTTP nor decide admissions (the webhook's HTTP side and planner do): it only hands PEM to
//! whatever serves, through a [`CertificateSink`].

mod inspect;
mod issue;
mod manager;
mod plan;
mod secret;

use std::time::Duration;

use super::tls::{ServingCert, TlsError};

pub(super) use issue::IssueError;

pub(super) use issue::Material;
pub use manager::manage_certificates;
pub use plan::CertificateAction;
pub(super) use plan::ServingReason;
pub use plan::{StoredCertificates, plan_certificates};

/// Where the served certificate goes (the webhook's TLS resolver).
pub trait CertificateSink: Send + Sync {
    /// Serves this certificate chain and key (PEM) from now on, or says why it cannot.
    fn load(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError>;

    /// Told, after a load, when the CA that signed the loaded certificate expires (seconds
    /// since the epoch); a sink that does not report it ignores it.
    fn signed_by_ca_until(&self, _not_after: i64) {}
}

impl CertificateSink for ServingCert {
    fn load(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
        self.set_pem(cert_chain_pem, key_pem)
    }

    fn signed_by_ca_until(&self, not_after: i64) {
        ServingCert::signed_by_ca_until(self, not_after);
    }
}

/// What the managed certificates are kept in, and how often they are looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSettings {
    /// The operator's namespace: where the Secret lives, and the Service's namespace.
    pub namespace: String,
    /// The Secret holding the CA and the serving certificate.
    pub secret: String,
    /// The Service the webhook is reached through; its DNS names go in the certificate.
    pub service: String,
    /// The MutatingWebhookConfiguration whose webhooks' caBundle is kept current.
    pub configuration: String,
    /// This replica's name on Events (none when empty).
    pub identity: String,
    /// Longest wait between two checks of the Secret.
    pub rotation_check: Duration,
    /// Longest wait between two checks of the caBundle.
    pub bundle_check: Duration,
    /// Wait between the two steps of a CA change (new CA in the bundle, then a serving
    /// certificate from it), for the apiserver to pick up the new caBundle.
    pub rollover_delay: Duration,
    /// Wait after a failed check.
    pub retry: Duration,
}

impl CertificateSettings {
    /// CertificateSettings with the default cadence: the Secret checked hourly, the caBundle every minute,
    /// ten seconds between the steps of a CA change, a failure retried after ten seconds.
    pub fn new(namespace: &str, secret: &str, service: &str, configuration: &str) -> Self {
        CertificateSettings {
            namespace: namespace.to_owned(),
            secret: secret.to_owned(),
            service: service.to_owned(),
            configuration: configuration.to_owned(),
            identity: String::new(),
            rotation_check: Duration::from_secs(3600),
            bundle_check: Duration::from_secs(60),
            rollover_delay: Duration::from_secs(10),
            retry: Duration::from_secs(10),
        }
    }
}

/// Keeping the certificates current failed (this time; it is retried).
#[derive(Debug, thiserror::Error)]
pub(super) enum CertificatesError {
    /// A request to the apiserver failed.
    #[error("failed to {what}")]
    Kube {
        /// What was being done.
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    /// Minting a certificate failed.
    #[error(transparent)]
    Issue(#[from] IssueError),
    /// Other writers kept changing the Secret.
    #[error("the webhook Secret kept changing while it was being made current")]
    Unsettled,
    /// The webhook configuration does not exist (yet).
    #[error(
        "the MutatingWebhookConfiguration {name:?} does not exist, so its caBundle cannot be set; \
         install it (the chart does) or name the right one with --webhook-configuration"
    )]
    ConfigurationMissing { name: String },
}

impl CertificatesError {
    fn kube(what: &'static str) -> impl FnOnce(kube::Error) -> CertificatesError {
        move |source| CertificatesError::Kube { what, source }
    }
}

/// The DNS names a Service is reached by from inside the cluster, as the serving certificate
/// must carry them: `S`, `S.NS`, `S.NS.svc`, `S.NS.svc.cluster.local`.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}
