//! The webhook's serving certificate: held in memory behind an atomic swap, handed to rustls for
//! every handshake, and fed either by [`CertFiles::watch`] (PEM files re-read when their bytes change,
//! as a Secret volume rotates them) or by the managed-certificate code through
//! [`ServingCert::set_pem`]. It owns the certificate and the rustls server configuration; it must
//! not decide where certificates come from or issue any.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::telemetry::{Certificate, Metrics, error_chain};
use arc_swap::ArcSwapOption;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use x509_parser::prelude::{FromDer, X509Certificate};

/// What can be wrong with a certificate and key.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate PEM holds no readable certificate.
    #[error("the certificate PEM holds no certificate")]
    NoCertificate,
    /// The certificate PEM could not be parsed.
    #[error("failed to read the certificate PEM")]
    CertificatePem(#[source] rustls::pki_types::pem::Error),
    /// The key PEM holds no readable private key.
    #[error("failed to read a private key from the key PEM")]
    KeyPem(#[source] rustls::pki_types::pem::Error),
    /// The key is of a type the crypto provider cannot sign with.
    #[error("the private key is not usable for TLS")]
    Key(#[source] rustls::Error),
    /// The key does not belong to the certificate.
    #[error("the private key does not match the certificate")]
    Mismatch(#[source] rustls::Error),
    /// The rustls server configuration could not be built.
    #[error("failed to build the TLS server configuration")]
    Config(#[source] rustls::Error),
    /// The client CA PEM holds no readable certificate.
    #[error("the webhook client CA PEM holds no certificate")]
    NoClientCa,
    /// The client CA PEM could not be parsed.
    #[error("failed to read the webhook client CA PEM")]
    ClientCaPem(#[source] rustls::pki_types::pem::Error),
    /// A client CA certificate is not usable as a trust anchor.
    #[error("a webhook client CA certificate is not usable as a trust anchor")]
    ClientCaCertificate(#[source] rustls::Error),
    /// The client certificate verifier could not be built.
    #[error("failed to build the webhook's client certificate check")]
    ClientCa(#[source] rustls::server::VerifierBuilderError),
    /// A certificate or key file could not be read.
    #[error("failed to read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The serving certificate, empty until the first good pair is set. Handshakes while it is empty
/// fail (rustls sends an alert); readiness stays false meanwhile.
pub struct ServingCert {
    current: ArcSwapOption<CertifiedKey>,
    provider: Arc<CryptoProvider>,
    /// Where the expiry of what is served is reported.
    metrics: Option<Arc<Metrics>>,
}

impl fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServingCert")
            .field("loaded", &self.is_loaded())
            .finish_non_exhaustive()
    }
}

impl ServingCert {
    /// An empty serving certificate using the ring provider (the one kube and the registry
    /// client use).
    pub fn new() -> Arc<ServingCert> {
        Arc::new(ServingCert {
            current: ArcSwapOption::empty(),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            metrics: None,
        })
    }

    /// As [`ServingCert::new`], reporting the expiry of each certificate it serves, and of the
    /// CA that signed it when told ([`ServingCert::signed_by_ca_until`]), to `metrics`.
    pub fn reporting(metrics: Arc<Metrics>) -> Arc<ServingCert> {
        Arc::new(ServingCert {
            current: ArcSwapOption::empty(),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            metrics: Some(metrics),
        })
    }

    /// Records that the CA that signed the served certificate expires at `not_after` (seconds
    /// since the epoch).
    pub fn signed_by_ca_until(&self, not_after: i64) {
        if let Some(metrics) = &self.metrics {
            metrics.set_certificate_expiry(Certificate::Ca, not_after);
        }
    }

    /// Replaces the certificate with `cert_chain_pem` (leaf first) and `key_pem`, atomically:
    /// handshakes already started keep the old one. On error the old one stays.
    pub fn set_pem(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
        let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(TlsError::CertificatePem)?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate);
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(TlsError::KeyPem)?;
        let signing = self
            .provider
            .key_provider
            .load_private_key(key)
            .map_err(TlsError::Key)?;
        let not_after = chain
            .first()
            .and_then(|leaf| X509Certificate::from_der(leaf).ok())
            .map(|(_, leaf)| leaf.validity().not_after.timestamp());
        let certified = CertifiedKey::new(chain, signing);
        certified.keys_match().map_err(TlsError::Mismatch)?;
        self.current.store(Some(Arc::new(certified)));
        if let (Some(metrics), Some(not_after)) = (&self.metrics, not_after) {
            metrics.set_certificate_expiry(Certificate::Serving, not_after);
        }
        Ok(())
    }

    /// Whether a certificate is loaded.
    pub fn is_loaded(&self) -> bool {
        self.current.load().is_some()
    }

    /// A rustls server configuration (TLS 1.2 and 1.3, no client authentication, HTTP/1.1)
    /// that asks `cert` for the certificate of every handshake; see
    /// [`ServingCert::server_config_for_clients`].
    pub fn server_config(cert: Arc<ServingCert>) -> Result<rustls::ServerConfig, TlsError> {
        ServingCert::server_config_for_clients(cert, None, Uncertified::Refuse)
    }

    /// As [`ServingCert::server_config`], and a client must present a certificate signed by a CA
    /// of `client_ca` (or is [`Uncertified`]). HTTP/1.1 only: the apiserver calls webhooks over
    /// it, and a stopping replica's `Connection: close` would need a GOAWAY in HTTP/2.
    pub fn server_config_for_clients(
        cert: Arc<ServingCert>,
        client_ca: Option<&[u8]>,
        uncertified: Uncertified,
    ) -> Result<rustls::ServerConfig, TlsError> {
        let provider = Arc::clone(&cert.provider);
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for der in CertificateDer::pem_slice_iter(pem) {
                    let der = der.map_err(TlsError::ClientCaPem)?;
                    roots.add(der).map_err(TlsError::ClientCaCertificate)?;
                }
                if roots.is_empty() {
                    return Err(TlsError::NoClientCa);
                }
                let mut verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                );
                if uncertified == Uncertified::AnswerWithoutEvents {
                    verifier = verifier.allow_unauthenticated();
                }
                let verifier = verifier.build().map_err(TlsError::ClientCa)?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_cert_resolver(cert);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// What the webhook does with a client that presents no certificate when it has a client CA.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Uncertified {
    /// Refused at the TLS handshake.
    #[default]
    Refuse,
    /// Answered as any client, but its reviews write no Event, so anyone who reaches the port
    /// names nothing in one. For a cluster whose apiserver may not present a certificate yet:
    /// refusing it would deny every pod of the `Fail` routes.
    AnswerWithoutEvents,
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}

/// The files [`CertFiles::watch`] reads.
#[derive(Clone, Debug)]
pub(super) struct CertFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// How often [`CertFiles::watch`] reads the files. Reading two small files a few times a second
/// costs nothing and, unlike inotify on the files, sees a Secret volume's `..data` symlink swap.
pub(super) const POLL_INTERVAL: Duration = Duration::from_millis(250);

impl CertFiles {
    /// Reads the files every `interval` until dropped, and sets the pair on `cert` whenever their
    /// bytes change. A pair that does not load (half-written, mismatched) is logged, the previous
    /// certificate kept, and retried when either file changes again.
    pub(super) async fn watch(self, cert: Arc<ServingCert>, interval: Duration) {
        let mut seen: Option<(Vec<u8>, Vec<u8>)> = None;
        let mut unreadable = false;
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let bytes = match (read(&self.cert), read(&self.key)) {
                (Ok(c), Ok(k)) => (c, k),
                (Err(err), _) | (_, Err(err)) => {
                    // Once per outage, not four times a second.
                    if !unreadable {
                        tracing::warn!(error = %error_chain(&err), "failed to read the serving certificate; keeping the current one");
                    }
                    unreadable = true;
                    continue;
                }
            };
            unreadable = false;
            if seen.as_ref() == Some(&bytes) {
                continue;
            }
            match cert.set_pem(&bytes.0, &bytes.1) {
                Ok(()) => tracing::info!(cert = %self.cert.display(), "serving certificate loaded"),
                Err(err) => tracing::warn!(
                    cert = %self.cert.display(),
                    key = %self.key.display(),
                    error = %error_chain(&err),
                    "the serving certificate and key do not load; keeping the current one"
                ),
            }
            seen = Some(bytes);
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests;
