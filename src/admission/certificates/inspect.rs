//! Reading stored PEM: certificates into the few facts the plan weighs (validity, CA flag, DNS
//! names, public key), private keys into rcgen key pairs, and the two checks that need both
//! (a key belongs to a certificate, a certificate was signed by a CA). Pure: no I/O, no clock.

use std::collections::BTreeSet;

use jiff::Timestamp;
use rcgen::KeyPair;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Why a Secret key's PEM is not what it should hold (its Event and log say this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PemProblem {
    #[error("not PEM: {0}")]
    NotPem(String),
    #[error("not PEM: not UTF-8 text")]
    NotUtf8,
    #[error("no PEM block")]
    NoBlock,
    /// `index` counts from 1.
    #[error("PEM block {index} is a {tag:?}, not a CERTIFICATE")]
    NotACertificateBlock { index: usize, tag: String },
    #[error("PEM block {index} is not a certificate: {problem}")]
    NotACertificate {
        index: usize,
        problem: CertificateProblem,
    },
    #[error("not a PKCS#8 private key: {0}")]
    NotAPrivateKey(String),
}

/// Why a CERTIFICATE block's DER is not a certificate the plan can weigh.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateProblem {
    #[error("{0}")]
    Der(String),
    #[error("trailing bytes after the certificate")]
    TrailingBytes,
    #[error("a validity date out of range")]
    DateOutOfRange,
    #[error("unreadable subject alternative names: {0}")]
    AlternativeNames(String),
}

/// What the plan needs to know about one certificate.
#[derive(Debug, Clone)]
pub(super) struct Facts {
    /// The certificate, DER.
    pub der: Vec<u8>,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    /// Basic constraints say it is a CA.
    pub is_ca: bool,
    /// Its DNS subject alternative names.
    pub dns_names: BTreeSet<String>,
    /// It also names something other than a DNS name (an IP address, a URI, …).
    pub other_names: bool,
    /// The raw public key (the bit string of its SubjectPublicKeyInfo).
    pub public_key: Vec<u8>,
}

impl Facts {
    /// The certificate as one PEM block.
    pub(super) fn pem(&self) -> String {
        encode_pem("CERTIFICATE", &self.der)
    }

    /// Whether `key` is this certificate's private key.
    pub(super) fn belongs_to(&self, key: &KeyPair) -> bool {
        self.public_key == key.public_key_raw()
    }

    /// Whether `issuer`'s key signed this certificate.
    pub(super) fn signed_by(&self, issuer: &Facts) -> bool {
        let (Ok((_, cert)), Ok((_, issuer))) = (
            X509Certificate::from_der(&self.der),
            X509Certificate::from_der(&issuer.der),
        ) else {
            return false;
        };
        cert.verify_signature(Some(issuer.public_key())).is_ok()
    }
}

/// Every certificate in a PEM bundle, in order. Blocks of another kind are an error, so a key
/// pasted under `ca.crt` is noticed.
pub(super) fn certificates(pem: &[u8]) -> Result<Vec<Facts>, PemProblem> {
    let blocks = pem::parse_many(pem).map_err(|err| PemProblem::NotPem(err.to_string()))?;
    if blocks.is_empty() {
        return Err(PemProblem::NoBlock);
    }
    blocks
        .iter()
        .enumerate()
        .map(|(index, block)| {
            if block.tag() != "CERTIFICATE" {
                return Err(PemProblem::NotACertificateBlock {
                    index: index + 1,
                    tag: block.tag().to_owned(),
                });
            }
            facts(block.contents()).map_err(|problem| PemProblem::NotACertificate {
                index: index + 1,
                problem,
            })
        })
        .collect()
}

/// When the certificate in `bundle` (PEM) that signed `cert_pem`'s first certificate expires, in
/// seconds since the epoch; `None` when either does not read or none of the bundle signed it.
pub(super) fn signer_expiry(cert_pem: &[u8], bundle: &[u8]) -> Option<i64> {
    let leaf = certificates(cert_pem).ok()?.into_iter().next()?;
    certificates(bundle)
        .ok()?
        .into_iter()
        .find(|ca| leaf.signed_by(ca))
        .map(|ca| ca.not_after.as_second())
}

/// A private key, PEM (PKCS#8, as written here).
pub(super) fn private_key(pem: &[u8]) -> Result<KeyPair, PemProblem> {
    let text = std::str::from_utf8(pem).map_err(|_| PemProblem::NotUtf8)?;
    KeyPair::from_pem(text).map_err(|err| PemProblem::NotAPrivateKey(err.to_string()))
}

/// One PEM block with LF line endings (what Kubernetes tools and rustls read).
pub(super) fn encode_pem(tag: &str, der: &[u8]) -> String {
    pem::encode_config(
        &pem::Pem::new(tag, der),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

fn facts(der: &[u8]) -> Result<Facts, CertificateProblem> {
    let (rest, cert) =
        X509Certificate::from_der(der).map_err(|err| CertificateProblem::Der(err.to_string()))?;
    if !rest.is_empty() {
        return Err(CertificateProblem::TrailingBytes);
    }
    let validity = cert.validity();
    let time = |seconds: i64| {
        Timestamp::from_second(seconds).map_err(|_| CertificateProblem::DateOutOfRange)
    };
    let mut dns_names = BTreeSet::new();
    let mut other_names = false;
    let sans = cert
        .subject_alternative_name()
        .map_err(|err| CertificateProblem::AlternativeNames(err.to_string()))?;
    for name in sans.iter().flat_map(|ext| &ext.value.general_names) {
        match name {
            GeneralName::DNSName(dns) => {
                dns_names.insert((*dns).to_owned());
            }
            _ => other_names = true,
        }
    }
    Ok(Facts {
        der: der.to_vec(),
        not_before: time(validity.not_before.timestamp())?,
        not_after: time(validity.not_after.timestamp())?,
        is_ca: cert.is_ca(),
        dns_names,
        other_names,
        public_key: cert.public_key().subject_public_key.data.to_vec(),
    })
}
