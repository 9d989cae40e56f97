use jiff::{SignedDuration, Timestamp};
use rcgen::{CertificateParams, Issuer, KeyPair, SanType};

use super::super::inspect::{self, Facts};
use super::super::issue::Material;
use super::*;

const DAY: SignedDuration = SignedDuration::from_hours(24);
const SECOND: SignedDuration = SignedDuration::from_secs(1);

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn names() -> Vec<String> {
    super::super::service_dns_names("ocifit-webhook", "ocifit-system")
}

fn stored(material: &Material) -> Stored {
    Stored {
        ca_crt: Some(material.ca_crt.clone().into_bytes()),
        ca_key: Some(material.ca_key.clone().into_bytes()),
        tls_crt: Some(material.tls_crt.clone().into_bytes()),
        tls_key: Some(material.tls_key.clone().into_bytes()),
    }
}

/// Plans and carries out; panics when the plan keeps everything.
fn apply(from: &Stored, now: Timestamp) -> (Action, Material) {
    let plan = plan(from, &names(), now);
    let material = plan.carry_out(now).unwrap().expect("a change");
    (plan.action, material)
}

/// A fresh Secret, as the first start writes it at `now`.
fn fresh(now: Timestamp) -> Material {
    apply(&Stored::default(), now).1
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

fn with_tls(material: &Material, (cert, key): (String, String)) -> Stored {
    Stored {
        tls_crt: Some(cert.into_bytes()),
        tls_key: Some(key.into_bytes()),
        ..stored(material)
    }
}

#[test]
fn first_start_mints_a_ten_year_ca_and_a_one_year_serving_certificate_for_the_service() {
    let (action, material) = apply(&Stored::default(), t0());
    assert_eq!(action, Action::Replace(Unusable::Absent));
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

#[test]
fn fresh_material_is_kept_until_a_third_of_the_serving_life_remains() {
    let material = fresh(t0());
    let tls = serving(&material);
    let due = tls.not_after - tls.not_after.duration_since(tls.not_before) / 3;

    let kept = plan(&stored(&material), &names(), t0());
    assert_eq!(kept.action(), &Action::Keep { renew_at: due });
    assert_eq!(kept.carry_out(t0()).unwrap(), None);
    assert_eq!(
        plan(&stored(&material), &names(), due - SECOND).action(),
        &Action::Keep { renew_at: due }
    );
    assert_eq!(
        plan(&stored(&material), &names(), due).action(),
        &Action::IssueServing(ServingReason::Expiring {
            not_after: tls.not_after
        })
    );
}

#[test]
fn an_expiring_serving_certificate_is_reissued_from_the_same_ca() {
    let material = fresh(t0());
    let later = t0() + 300 * DAY;
    let (action, renewed) = apply(&stored(&material), later);
    assert!(matches!(
        action,
        Action::IssueServing(ServingReason::Expiring { .. })
    ));
    assert!(!action.is_unexpected());
    assert_eq!(renewed.ca_crt, material.ca_crt);
    assert_eq!(renewed.ca_key, material.ca_key);
    assert_ne!(renewed.tls_key, material.tls_key);
    assert!(trusted(&renewed.ca_crt, &renewed.tls_crt));
    assert_eq!(serving(&renewed).not_after, later + SERVING_VALIDITY);
    assert!(matches!(
        plan(&stored(&renewed), &names(), later).action(),
        Action::Keep { .. }
    ));
}

#[test]
fn an_expired_serving_certificate_is_reissued() {
    let material = fresh(t0());
    let (action, renewed) = apply(&stored(&material), t0() + 400 * DAY);
    assert!(matches!(
        action,
        Action::IssueServing(ServingReason::Expiring { .. })
    ));
    assert!(trusted(&renewed.ca_crt, &renewed.tls_crt));
}

#[test]
fn a_short_lived_serving_certificate_is_renewed_by_its_own_lifetime() {
    let material = fresh(t0());
    // Valid 30 minutes: due 10 minutes before its end.
    let short = leaf(
        &material,
        dns(&names()),
        t0(),
        t0() + SignedDuration::from_mins(30),
    );
    let due = t0() + SignedDuration::from_mins(20);
    let stored = with_tls(&material, short);
    assert_eq!(
        plan(&stored, &names(), due - SECOND).action(),
        &Action::Keep { renew_at: due }
    );
    assert!(matches!(
        plan(&stored, &names(), due).action(),
        Action::IssueServing(ServingReason::Expiring { .. })
    ));
}

#[test]
fn the_ca_rotates_when_a_year_or_less_remains_and_the_old_one_stays_trusted() {
    let material = fresh(t0());
    let ca = certs(&material.ca_crt).remove(0);
    let rotate_at = ca.not_after - CA_RENEW_BEFORE;
    // A serving certificate current at that time, from the same CA.
    let (_, current) = apply(&stored(&material), rotate_at - 10 * DAY);
    assert_eq!(
        plan(&stored(&current), &names(), rotate_at - SECOND).action(),
        &Action::Keep {
            renew_at: rotate_at
        }
    );

    let (action, rotated) = apply(&stored(&current), rotate_at);
    assert_eq!(
        action,
        Action::RotateCa {
            expires: ca.not_after
        }
    );
    assert!(!action.is_unexpected());
    let bundle = certs(&rotated.ca_crt);
    assert_eq!(bundle.len(), 2, "the new CA and the old one");
    assert!(bundle[0].belongs_to(&KeyPair::from_pem(&rotated.ca_key).unwrap()));
    assert_eq!(bundle[0].not_after, rotate_at + CA_VALIDITY);
    assert_eq!(bundle[1].der, ca.der);
    // First step: the serving certificate stays until the new CA is trusted.
    assert_eq!(rotated.tls_crt, current.tls_crt);
    assert_eq!(rotated.tls_key, current.tls_key);
    assert!(trusted(&rotated.ca_crt, &current.tls_crt));

    // Second step: a serving certificate from the new CA; the bundle stays.
    let (action, switched) = apply(&stored(&rotated), rotate_at);
    assert_eq!(
        action,
        Action::IssueServing(ServingReason::SignedByPreviousCa)
    );
    assert!(!action.is_unexpected());
    assert_eq!(switched.ca_crt, rotated.ca_crt);
    assert_eq!(switched.ca_key, rotated.ca_key);
    assert!(serving(&switched).signed_by(&bundle[0]));
    let rotated = switched;

    // The serving certificate's renewal (8 months on) keeps both CAs in the bundle.
    let Action::Keep { renew_at } = *plan(&stored(&rotated), &names(), rotate_at).action() else {
        panic!("rotated material is current");
    };
    assert!(renew_at < ca.not_after);
    let (_, renewed) = apply(&stored(&rotated), renew_at);
    assert_eq!(renewed.ca_crt, rotated.ca_crt);

    // The old CA is dropped once it has expired, and nothing else changes.
    let prune_at = ca.not_after + SECOND;
    assert_eq!(
        plan(&stored(&renewed), &names(), renew_at).action(),
        &Action::Keep { renew_at: prune_at }
    );
    let (action, pruned) = apply(&stored(&renewed), prune_at);
    assert_eq!(action, Action::PruneBundle);
    assert!(!action.is_unexpected());
    assert_eq!(certs(&pruned.ca_crt).len(), 1);
    assert_eq!(certs(&pruned.ca_crt)[0].der, bundle[0].der);
    assert_eq!(pruned.ca_key, rotated.ca_key);
    assert_eq!(serving(&pruned).der, serving(&renewed).der);
    assert!(matches!(
        plan(&stored(&pruned), &names(), prune_at).action(),
        Action::Keep { .. }
    ));
}

#[test]
fn a_rotation_keeps_a_serving_certificate_due_for_renewal_while_it_is_valid() {
    let material = fresh(t0());
    let ca = certs(&material.ca_crt).remove(0);
    let rotate_at = ca.not_after - CA_RENEW_BEFORE;
    // Issued 300 days before the rotation: due for renewal, valid for 65 more days.
    let (_, current) = apply(&stored(&material), rotate_at - 300 * DAY);
    let (action, rotated) = apply(&stored(&current), rotate_at);
    assert!(matches!(action, Action::RotateCa { .. }));
    assert_eq!(rotated.tls_crt, current.tls_crt);
}

#[test]
fn a_rotation_issues_from_the_new_ca_at_once_when_nothing_valid_serves() {
    let material = fresh(t0());
    let ca = certs(&material.ca_crt).remove(0);
    let rotate_at = ca.not_after - CA_RENEW_BEFORE;
    // The first year's serving certificate expired long ago.
    let (action, rotated) = apply(&stored(&material), rotate_at);
    assert!(matches!(action, Action::RotateCa { .. }));
    let bundle = certs(&rotated.ca_crt);
    assert!(serving(&rotated).signed_by(&bundle[0]));
    assert_eq!(serving(&rotated).not_after, rotate_at + SERVING_VALIDITY);
    assert!(matches!(
        plan(&stored(&rotated), &names(), rotate_at).action(),
        Action::Keep { .. }
    ));
}

#[test]
fn an_expired_ca_is_replaced_with_a_warning() {
    let material = fresh(t0());
    let not_after = certs(&material.ca_crt)[0].not_after;
    let (action, replaced) = apply(&stored(&material), not_after + SECOND);
    assert_eq!(action, Action::Replace(Unusable::Expired { not_after }));
    assert!(action.is_unexpected());
    assert_eq!(
        certs(&replaced.ca_crt).len(),
        1,
        "the expired CA is not kept"
    );
    assert!(trusted(&replaced.ca_crt, &replaced.tls_crt));
}

#[test]
fn a_ca_from_the_future_is_replaced() {
    let material = fresh(t0());
    let not_before = certs(&material.ca_crt)[0].not_before;
    let action = plan(&stored(&material), &names(), not_before - SECOND)
        .action()
        .clone();
    assert_eq!(
        action,
        Action::Replace(Unusable::NotYetValid { not_before })
    );
    assert!(action.is_unexpected());
}

#[test]
fn garbage_in_ca_crt_starts_over_with_a_message_naming_the_key() {
    let material = fresh(t0());
    for garbage in [
        "hello".as_bytes().to_vec(),
        Vec::new(),
        vec![0xff, 0xfe, 0x00],
        b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n".to_vec(),
        material.ca_key.clone().into_bytes(),
    ] {
        let from = Stored {
            ca_crt: Some(garbage.clone()),
            ..stored(&material)
        };
        let (action, replaced) = apply(&from, t0());
        let Action::Replace(Unusable::Unreadable { key, .. }) = &action else {
            panic!("{garbage:?}: {action:?}");
        };
        assert_eq!(*key, "ca.crt");
        assert!(action.is_unexpected());
        assert!(
            action.to_string().contains("ca.crt is unusable"),
            "{action}"
        );
        assert!(trusted(&replaced.ca_crt, &replaced.tls_crt));
    }
}

#[test]
fn a_key_pasted_as_ca_crt_is_named_as_such() {
    let material = fresh(t0());
    let from = Stored {
        ca_crt: Some(material.ca_key.clone().into_bytes()),
        ..stored(&material)
    };
    let message = plan(&from, &names(), t0()).action().to_string();
    assert!(
        message.contains("\"PRIVATE KEY\", not a CERTIFICATE"),
        "{message}"
    );
}

#[test]
fn an_unreadable_ca_key_starts_over_but_keeps_trusting_the_old_ca_until_it_expires() {
    let material = fresh(t0());
    let from = Stored {
        ca_key: Some(b"garbage".to_vec()),
        ..stored(&material)
    };
    let (action, replaced) = apply(&from, t0());
    assert!(
        matches!(
            &action,
            Action::Replace(Unusable::Unreadable { key: "ca.key", .. })
        ),
        "{action:?}"
    );
    let bundle = certs(&replaced.ca_crt);
    assert_eq!(bundle.len(), 2);
    assert!(
        trusted(&replaced.ca_crt, &material.tls_crt),
        "old serving cert"
    );
    assert!(
        trusted(&replaced.ca_crt, &replaced.tls_crt),
        "new serving cert"
    );
}

#[test]
fn a_ca_key_of_another_ca_starts_over() {
    let material = fresh(t0());
    let other = fresh(t0());
    let from = Stored {
        ca_key: Some(other.ca_key.into_bytes()),
        ..stored(&material)
    };
    let action = plan(&from, &names(), t0()).action().clone();
    assert_eq!(action, Action::Replace(Unusable::KeyMatchesNoCertificate));
    assert!(action.is_unexpected());
}

#[test]
fn a_serving_certificate_stored_as_the_ca_is_not_a_ca() {
    let material = fresh(t0());
    let from = Stored {
        ca_crt: Some(material.tls_crt.clone().into_bytes()),
        ca_key: Some(material.tls_key.clone().into_bytes()),
        ..stored(&material)
    };
    assert_eq!(
        plan(&from, &names(), t0()).action(),
        &Action::Replace(Unusable::NotACa)
    );
}

#[test]
fn a_missing_ca_half_starts_over() {
    let material = fresh(t0());
    let no_key = Stored {
        ca_key: None,
        ..stored(&material)
    };
    assert_eq!(
        plan(&no_key, &names(), t0()).action(),
        &Action::Replace(Unusable::Missing("ca.key"))
    );
    let no_cert = Stored {
        ca_crt: None,
        ..stored(&material)
    };
    let action = plan(&no_cert, &names(), t0()).action().clone();
    assert_eq!(action, Action::Replace(Unusable::Missing("ca.crt")));
    assert!(action.is_unexpected(), "half a Secret is not a first start");
}

#[test]
fn a_missing_serving_half_is_reissued_from_the_ca() {
    let material = fresh(t0());
    for (missing, from) in [
        (
            "tls.crt",
            Stored {
                tls_crt: None,
                ..stored(&material)
            },
        ),
        (
            "tls.key",
            Stored {
                tls_key: None,
                ..stored(&material)
            },
        ),
    ] {
        let (action, renewed) = apply(&from, t0());
        assert_eq!(
            action,
            Action::IssueServing(ServingReason::Missing(missing))
        );
        assert!(action.is_unexpected());
        assert_eq!(renewed.ca_crt, material.ca_crt);
        assert!(trusted(&renewed.ca_crt, &renewed.tls_crt));
    }
}

#[test]
fn garbage_serving_data_is_reissued_with_a_message_naming_the_key() {
    let material = fresh(t0());
    for (key, from) in [
        (
            "tls.crt",
            Stored {
                tls_crt: Some(b"junk".to_vec()),
                ..stored(&material)
            },
        ),
        (
            "tls.key",
            Stored {
                tls_key: Some(
                    b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec(),
                ),
                ..stored(&material)
            },
        ),
    ] {
        let action = plan(&from, &names(), t0()).action().clone();
        assert!(
            matches!(&action, Action::IssueServing(ServingReason::Unreadable { key: k, .. }) if *k == key),
            "{action:?}"
        );
        assert!(action.is_unexpected());
        assert!(action.to_string().contains(&format!("{key} is unusable")));
    }
}

#[test]
fn a_serving_key_that_is_not_the_certificates_is_reissued() {
    let material = fresh(t0());
    let from = Stored {
        tls_key: Some(fresh(t0()).tls_key.into_bytes()),
        ..stored(&material)
    };
    let action = plan(&from, &names(), t0()).action().clone();
    assert_eq!(action, Action::IssueServing(ServingReason::KeyMismatch));
    assert!(action.is_unexpected());
}

#[test]
fn a_serving_certificate_from_another_ca_is_reissued() {
    let material = fresh(t0());
    let other = fresh(t0());
    let from = Stored {
        tls_crt: Some(other.tls_crt.into_bytes()),
        tls_key: Some(other.tls_key.into_bytes()),
        ..stored(&material)
    };
    assert_eq!(
        plan(&from, &names(), t0()).action(),
        &Action::IssueServing(ServingReason::NotSignedByCa)
    );
}

#[test]
fn a_serving_certificate_for_other_names_is_reissued_for_the_wanted_ones() {
    let material = fresh(t0());
    let renamed = super::super::service_dns_names("webhook", "ops");
    let plan_ = plan(&stored(&material), &renamed, t0());
    let Action::IssueServing(ServingReason::DnsNames { have, want }) = plan_.action() else {
        panic!("{:?}", plan_.action());
    };
    assert_eq!(have.len(), 4);
    assert!(have.contains(&"ocifit-webhook.ocifit-system.svc".to_owned()));
    assert!(want.contains(&"webhook.ops.svc".to_owned()));
    assert!(!plan_.action().is_unexpected());
    let renewed = plan_.carry_out(t0()).unwrap().unwrap();
    let tls = serving(&renewed);
    assert!(tls.dns_names.contains("webhook.ops.svc.cluster.local"));
    assert!(!tls.dns_names.contains("ocifit-webhook"));
}

#[test]
fn one_name_missing_or_extra_is_a_difference_but_order_is_not() {
    let material = fresh(t0());
    let mut reversed = names();
    reversed.reverse();
    assert!(matches!(
        plan(&stored(&material), &reversed, t0()).action(),
        Action::Keep { .. }
    ));
    let fewer = &names()[..3];
    assert!(matches!(
        plan(&stored(&material), fewer, t0()).action(),
        Action::IssueServing(ServingReason::DnsNames { .. })
    ));
    let mut more = names();
    more.push("extra.example".to_owned());
    assert!(matches!(
        plan(&stored(&material), &more, t0()).action(),
        Action::IssueServing(ServingReason::DnsNames { .. })
    ));
}

#[test]
fn an_ip_address_in_the_serving_certificate_is_a_difference() {
    let material = fresh(t0());
    let mut sans = dns(&names());
    sans.push(SanType::IpAddress([127, 0, 0, 1].into()));
    let from = with_tls(
        &material,
        leaf(&material, sans, t0(), t0() + SERVING_VALIDITY),
    );
    let action = plan(&from, &names(), t0()).action().clone();
    let Action::IssueServing(ServingReason::DnsNames { have, .. }) = &action else {
        panic!("{action:?}");
    };
    assert_eq!(have.last().map(String::as_str), Some("<other>"));
}

#[test]
fn a_serving_certificate_from_the_future_is_reissued() {
    let material = fresh(t0());
    let not_before = t0() + DAY;
    let from = with_tls(
        &material,
        leaf(
            &material,
            dns(&names()),
            not_before,
            t0() + SERVING_VALIDITY,
        ),
    );
    assert_eq!(
        plan(&from, &names(), t0()).action(),
        &Action::IssueServing(ServingReason::NotYetValid { not_before })
    );
}

#[test]
fn an_unreadable_older_ca_in_the_bundle_makes_the_whole_bundle_unreadable() {
    let material = fresh(t0());
    let from = Stored {
        ca_crt: Some(
            format!(
                "{}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                material.ca_crt
            )
            .into_bytes(),
        ),
        ..stored(&material)
    };
    assert!(matches!(
        plan(&from, &names(), t0()).action(),
        Action::Replace(Unusable::Unreadable { key: "ca.crt", .. })
    ));
}
