use jiff::{SignedDuration, Timestamp};
use rcgen::{CertificateParams, Issuer, KeyPair, SanType};

use super::super::inspect::{self, Facts};
use super::super::issue::Material;
use super::*;

mod ca;
mod property;
mod serving;

const DAY: SignedDuration = SignedDuration::from_hours(24);
const SECOND: SignedDuration = SignedDuration::from_secs(1);

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn names() -> Vec<String> {
    crate::admission::certificates::service_dns_names("ocifit-webhook", "ocifit-system")
}

fn stored(material: &Material) -> StoredCertificates {
    StoredCertificates {
        ca_crt: Some(material.ca_crt.clone().into_bytes()),
        ca_key: Some(material.ca_key.clone().into_bytes()),
        tls_crt: Some(material.tls_crt.clone().into_bytes()),
        tls_key: Some(material.tls_key.clone().into_bytes()),
    }
}

/// Plans and carries out; panics when the plan keeps everything.
fn apply(from: &StoredCertificates, now: Timestamp) -> (CertificateAction, Material) {
    let plan = plan_certificates(from, &names(), now);
    let material = plan.carry_out(now).unwrap().expect("a change");
    (plan.action, material)
}

/// A fresh Secret, as the first start writes it at `now`.
fn fresh(now: Timestamp) -> Material {
    apply(&StoredCertificates::default(), now).1
}

fn certs(pem: &str) -> Vec<Facts> {
    inspect::certificates(pem.as_bytes()).unwrap()
}

fn serving(material: &Material) -> Facts {
    certs(&material.tls_crt).remove(0)
}

/// Whether the serving certificate chains to a CA in the bundle.
fn trusted(bundle: &str, tls_crt: &str) -> bool {
    let leaf = certs(tls_crt).remove(0);
    certs(bundle).iter().any(|ca| leaf.signed_by(ca))
}

/// A serving certificate signed by the bundle's first CA with chosen names and validity.
fn leaf(
    ca: &Material,
    sans: Vec<SanType>,
    not_before: Timestamp,
    not_after: Timestamp,
) -> (String, String) {
    let issuer =
        Issuer::from_ca_cert_pem(&ca.ca_crt, KeyPair::from_pem(&ca.ca_key).unwrap()).unwrap();
    let mut params = CertificateParams::default();
    params.subject_alt_names = sans;
    params.not_before = time::OffsetDateTime::from_unix_timestamp(not_before.as_second()).unwrap();
    params.not_after = time::OffsetDateTime::from_unix_timestamp(not_after.as_second()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn dns(names: &[String]) -> Vec<SanType> {
    names
        .iter()
        .map(|n| SanType::DnsName(n.clone().try_into().unwrap()))
        .collect()
}

fn with_tls(material: &Material, (cert, key): (String, String)) -> StoredCertificates {
    StoredCertificates {
        tls_crt: Some(cert.into_bytes()),
        tls_key: Some(key.into_bytes()),
        ..stored(material)
    }
}

#[test]
fn first_start_mints_a_ten_year_ca_and_a_one_year_serving_certificate_for_the_service() {
    let (action, material) = apply(&StoredCertificates::default(), t0());
    assert_eq!(action, CertificateAction::Replace(Unusable::Absent));
    assert!(!action.is_unexpected(), "the first start is no warning");

    let bundle = certs(&material.ca_crt);
    assert_eq!(bundle.len(), 1);
    let ca = &bundle[0];
    assert!(ca.is_ca);
    assert!(ca.belongs_to(&KeyPair::from_pem(&material.ca_key).unwrap()));
    assert_eq!(ca.not_after, t0() + CA_VALIDITY);
    assert!(ca.not_before < t0(), "backdated for clock skew");

    let tls = serving(&material);
    assert!(!tls.is_ca);
    assert!(tls.signed_by(ca));
    assert!(tls.belongs_to(&KeyPair::from_pem(&material.tls_key).unwrap()));
    assert_eq!(tls.not_after, t0() + SERVING_VALIDITY);
    assert_eq!(
        tls.dns_names.iter().cloned().collect::<Vec<_>>(),
        [
            "ocifit-webhook",
            "ocifit-webhook.ocifit-system",
            "ocifit-webhook.ocifit-system.svc",
            "ocifit-webhook.ocifit-system.svc.cluster.local",
        ]
    );
    assert!(!tls.other_names);
}
