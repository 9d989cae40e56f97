//! Certificates and keys minted in memory with rcgen: the cluster's CA, the apiserver's serving
//! certificate, the admin client certificate, the service-account key pair, and serving certificates
//! for the HTTPS servers tests run themselves (webhooks). It writes no files and talks to nothing.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::{Error, Result};

/// A certificate authority that signs server and client certificates.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl CertificateAuthority {
    /// A new self-signed CA named `common_name`.
    pub fn new(common_name: &str) -> Result<Self> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(common_name, None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(Error::Certificate)?;
        let cert = params.self_signed(&key).map_err(Error::Certificate)?;
        Ok(Self {
            issuer: Issuer::new(params, key),
            cert_pem: cert.pem(),
        })
    }

    /// The CA certificate, PEM: what clients trust (a kubeconfig's CA, a webhook's `caBundle`).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A serving certificate for `subject_alt_names` (IP addresses or DNS names, e.g. `127.0.0.1`).
    pub fn issue_server(
        &self,
        common_name: &str,
        subject_alt_names: &[&str],
    ) -> Result<IssuedCert> {
        let sans: Vec<String> = subject_alt_names.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).map_err(Error::Certificate)?;
        params.distinguished_name = name(common_name, None);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(&params)
    }

    /// A client certificate; Kubernetes reads the user from `common_name` and a group from
    /// `organization` (`system:masters` is cluster admin).
    pub fn issue_client(
        &self,
        common_name: &str,
        organization: Option<&str>,
    ) -> Result<IssuedCert> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(common_name, organization);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(&params)
    }

    fn sign(&self, params: &CertificateParams) -> Result<IssuedCert> {
        let key = KeyPair::generate().map_err(Error::Certificate)?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(Error::Certificate)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        })
    }
}

/// A certificate with its private key.
#[derive(Clone)]
pub struct IssuedCert {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its PKCS#8 private key, PEM.
    pub key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl IssuedCert {
    /// A rustls server configuration serving this certificate (ring provider, as kube uses).
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>> {
        install_crypto_provider();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()));
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![self.cert_der.clone()], key)
            .map_err(Error::Tls)?;
        Ok(Arc::new(config))
    }
}

/// The service-account token signing key pair.
pub struct ServiceAccountKeys {
    /// The private key, PKCS#8 PEM (`--service-account-signing-key-file`).
    pub private_pem: String,
    /// The public key, PEM (`--service-account-key-file`).
    pub public_pem: String,
}

impl ServiceAccountKeys {
    /// A new ECDSA P-256 key pair.
    pub fn generate() -> Result<Self> {
        let key = KeyPair::generate().map_err(Error::Certificate)?;
        Ok(Self {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

/// Installs ring as rustls' process-wide provider, the one kube uses; a provider already installed
/// (by this or by the code under test) is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name.push(DnType::CommonName, common_name);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_server_certificate_builds_a_tls_server_config() {
        let ca = CertificateAuthority::new("test CA").unwrap();
        let served = ca
            .issue_server("webhook", &["127.0.0.1", "localhost"])
            .unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(served.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        served.server_config().unwrap();
    }

    #[test]
    fn service_account_keys_are_a_pem_pair() {
        let keys = ServiceAccountKeys::generate().unwrap();
        assert!(keys.private_pem.contains("PRIVATE KEY"));
        assert!(keys.public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
    }
}
