//! The serving certificate: renewal by its own lifetime, and every way it can be wrong.

use super::*;

#[test]
fn fresh_material_is_kept_until_a_third_of_the_serving_life_remains() {
    let material = fresh(t0());
    let tls = serving(&material);
    let due = tls.not_after - tls.not_after.duration_since(tls.not_before) / 3;

    let kept = plan_certificates(&stored(&material), &names(), t0());
    assert_eq!(kept.action(), &CertificateAction::Keep { renew_at: due });
    assert_eq!(kept.carry_out(t0()).unwrap(), None);
    assert_eq!(
        plan_certificates(&stored(&material), &names(), due - SECOND).action(),
        &CertificateAction::Keep { renew_at: due }
    );
    assert_eq!(
        plan_certificates(&stored(&material), &names(), due).action(),
        &CertificateAction::IssueServing(ServingReason::Expiring {
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
        CertificateAction::IssueServing(ServingReason::Expiring { .. })
    ));
    assert!(!action.is_unexpected());
    assert_eq!(renewed.ca_crt, material.ca_crt);
    assert_eq!(renewed.ca_key, material.ca_key);
    assert_ne!(renewed.tls_key, material.tls_key);
    assert!(trusted(&renewed.ca_crt, &renewed.tls_crt));
    assert_eq!(serving(&renewed).not_after, later + SERVING_VALIDITY);
    assert!(matches!(
        plan_certificates(&stored(&renewed), &names(), later).action(),
        CertificateAction::Keep { .. }
    ));
}

#[test]
fn an_expired_serving_certificate_is_reissued() {
    let material = fresh(t0());
    let (action, renewed) = apply(&stored(&material), t0() + 400 * DAY);
    assert!(matches!(
        action,
        CertificateAction::IssueServing(ServingReason::Expiring { .. })
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
        plan_certificates(&stored, &names(), due - SECOND).action(),
        &CertificateAction::Keep { renew_at: due }
    );
    assert!(matches!(
        plan_certificates(&stored, &names(), due).action(),
        CertificateAction::IssueServing(ServingReason::Expiring { .. })
    ));
}

#[test]
fn a_missing_serving_half_is_reissued_from_the_ca() {
    let material = fresh(t0());
    for (missing, from) in [
        (
            "tls.crt",
            StoredCertificates {
                tls_crt: None,
                ..stored(&material)
            },
        ),
        (
            "tls.key",
            StoredCertificates {
                tls_key: None,
                ..stored(&material)
            },
        ),
    ] {
        let (action, renewed) = apply(&from, t0());
        assert_eq!(
            action,
            CertificateAction::IssueServing(ServingReason::Missing(missing))
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
            StoredCertificates {
                tls_crt: Some(b"junk".to_vec()),
                ..stored(&material)
            },
        ),
        (
            "tls.key",
            StoredCertificates {
                tls_key: Some(
                    b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec(),
                ),
                ..stored(&material)
            },
        ),
    ] {
        let action = plan_certificates(&from, &names(), t0()).action().clone();
        assert!(
            matches!(&action, CertificateAction::IssueServing(ServingReason::Unreadable { key: k, .. }) if *k == key),
            "{action:?}"
        );
        assert!(action.is_unexpected());
        assert!(action.to_string().contains(&format!("{key} is unusable")));
    }
}

#[test]
fn a_serving_key_that_is_not_the_certificates_is_reissued() {
    let material = fresh(t0());
    let from = StoredCertificates {
        tls_key: Some(fresh(t0()).tls_key.into_bytes()),
        ..stored(&material)
    };
    let action = plan_certificates(&from, &names(), t0()).action().clone();
    assert_eq!(
        action,
        CertificateAction::IssueServing(ServingReason::KeyMismatch)
    );
    assert!(action.is_unexpected());
}

#[test]
fn a_serving_certificate_from_another_ca_is_reissued() {
    let material = fresh(t0());
    let other = fresh(t0());
    let from = StoredCertificates {
        tls_crt: Some(other.tls_crt.into_bytes()),
        tls_key: Some(other.tls_key.into_bytes()),
        ..stored(&material)
    };
    assert_eq!(
        plan_certificates(&from, &names(), t0()).action(),
        &CertificateAction::IssueServing(ServingReason::NotSignedByCa)
    );
}

#[test]
fn a_serving_certificate_for_other_names_is_reissued_for_the_wanted_ones() {
    let material = fresh(t0());
    let renamed = crate::admission::certificates::service_dns_names("webhook", "ops");
    let plan_ = plan_certificates(&stored(&material), &renamed, t0());
    let CertificateAction::IssueServing(ServingReason::DnsNames { have, want }) = plan_.action()
    else {
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
        plan_certificates(&stored(&material), &reversed, t0()).action(),
        CertificateAction::Keep { .. }
    ));
    let fewer = &names()[..3];
    assert!(matches!(
        plan_certificates(&stored(&material), fewer, t0()).action(),
        CertificateAction::IssueServing(ServingReason::DnsNames { .. })
    ));
    let mut more = names();
    more.push("extra.example".to_owned());
    assert!(matches!(
        plan_certificates(&stored(&material), &more, t0()).action(),
        CertificateAction::IssueServing(ServingReason::DnsNames { .. })
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
    let action = plan_certificates(&from, &names(), t0()).action().clone();
    let CertificateAction::IssueServing(ServingReason::DnsNames { have, .. }) = &action else {
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
        plan_certificates(&from, &names(), t0()).action(),
        &CertificateAction::IssueServing(ServingReason::NotYetValid { not_before })
    );
}
