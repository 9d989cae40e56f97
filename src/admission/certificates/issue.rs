//! Carrying out a [`CertificatePlan`]: minting the CA and serving certificates it calls for (rcgen, ECDSA
//! P-256, ring) and laying out the Secret's new data. No I/O and no clock (time is passed in);
//! key generation draws on the system's randomness.

use jiff::{SignedDuration, Timestamp};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use time::OffsetDateTime;

use super::inspect::{self, Facts};
use super::plan::{CA_VALIDITY, CertificateAction, CertificatePlan, SERVING_VALIDITY};

/// New certificates start this long before they are minted, so a replica whose clock is a little
/// behind still accepts them.
const BACKDATE: SignedDuration = SignedDuration::from_hours(1);

/// The Secret's data after a change, PEM throughout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    /// `ca.crt`: the current CA first, then older CAs that are still valid (the `caBundle`).
    pub ca_crt: String,
    /// `ca.key`: the current CA's key.
    pub ca_key: String,
    /// `tls.crt`: the serving certificate.
    pub tls_crt: String,
    /// `tls.key`: its key.
    pub tls_key: String,
}

/// Minting a certificate failed.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// rcgen could not generate a key or sign a certificate.
    #[error("failed to mint the {what}")]
    Mint {
        /// Which certificate.
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    /// A time could not be expressed as a certificate validity date.
    #[error("failed to express {time} as a certificate date")]
    Date { time: Timestamp },
}

impl CertificatePlan {
    /// The Secret's new data, or `None` when the plan keeps everything.
    pub fn carry_out(&self, now: Timestamp) -> Result<Option<Material>, IssueError> {
        let older = |facts: &[Facts]| facts.iter().map(Facts::pem).collect::<String>();
        match (&self.action, &self.signer, &self.serving) {
            (CertificateAction::Keep { .. }, _, _) => Ok(None),
            (CertificateAction::PruneBundle, Some((signer, ca_key)), Some((tls_crt, tls_key))) => {
                Ok(Some(Material {
                    ca_crt: signer.pem() + &older(&self.retained),
                    ca_key: ca_key.clone(),
                    tls_crt: tls_crt.clone(),
                    tls_key: tls_key.clone(),
                }))
            }
            (CertificateAction::IssueServing(_), Some((signer, ca_key)), _) => {
                let key = KeyPair::from_pem(ca_key).map_err(mint("CA key"))?;
                let issuer = Issuer::from_ca_cert_pem(&signer.pem(), key).map_err(mint("CA"))?;
                let (tls_crt, tls_key) = self.serving_cert(&issuer, now)?;
                Ok(Some(Material {
                    ca_crt: signer.pem() + &older(&self.retained),
                    ca_key: ca_key.clone(),
                    tls_crt,
                    tls_key,
                }))
            }
            (action, _, serving) => {
                let (ca_crt, issuer) = new_ca(now)?;
                let ca_key = issuer.key().serialize_pem();
                let (tls_crt, tls_key) = match (action, serving) {
                    // The first step of a rotation keeps a serving certificate that is still
                    // valid, until the new CA is trusted.
                    (CertificateAction::RotateCa { .. }, Some(serving)) => serving.clone(),
                    _ => self.serving_cert(&issuer, now)?,
                };
                Ok(Some(Material {
                    ca_crt: ca_crt + &older(&self.retained),
                    ca_key,
                    tls_crt,
                    tls_key,
                }))
            }
        }
    }

    /// A serving certificate for the plan's DNS names, and its key.
    fn serving_cert(
        &self,
        issuer: &Issuer<'_, KeyPair>,
        now: Timestamp,
    ) -> Result<(String, String), IssueError> {
        let mut params =
            CertificateParams::new(self.dns_names.clone()).map_err(mint("serving certificate"))?;
        let common_name = self
            .dns_names
            .first()
            .map_or("ocifit-webhook", String::as_str);
        params.distinguished_name = name(common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params, now, SERVING_VALIDITY)?;
        let key = KeyPair::generate().map_err(mint("serving key"))?;
        let cert = params
            .signed_by(&key, issuer)
            .map_err(mint("serving certificate"))?;
        Ok((
            inspect::encode_pem("CERTIFICATE", cert.der()),
            key.serialize_pem(),
        ))
    }
}

/// A new self-signed CA (PEM) and the issuer it signs with.
fn new_ca(now: Timestamp) -> Result<(String, Issuer<'static, KeyPair>), IssueError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = name(&format!("ocifit webhook CA {now}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params, now, CA_VALIDITY)?;
    let key = KeyPair::generate().map_err(mint("CA key"))?;
    let cert = params.self_signed(&key).map_err(mint("CA"))?;
    Ok((
        inspect::encode_pem("CERTIFICATE", cert.der()),
        Issuer::new(params, key),
    ))
}

fn validity(
    params: &mut CertificateParams,
    now: Timestamp,
    lifetime: SignedDuration,
) -> Result<(), IssueError> {
    params.not_before = date(now - BACKDATE)?;
    params.not_after = date(now + lifetime)?;
    Ok(())
}

fn date(time: Timestamp) -> Result<OffsetDateTime, IssueError> {
    OffsetDateTime::from_unix_timestamp(time.as_second()).map_err(|_| IssueError::Date { time })
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "ocifit");
    name.push(DnType::CommonName, common_name);
    name
}

fn mint(what: &'static str) -> impl Fn(rcgen::Error) -> IssueError {
    move |source| IssueError::Mint { what, source }
}
