//! The CA: rotation in two steps, pruning, and every way it can be wrong.

use super::*;

#[test]
fn the_ca_rotates_when_a_year_or_less_remains_and_the_old_one_stays_trusted() {
    let material = fresh(t0());
    let ca = certs(&material.ca_crt).remove(0);
    let rotate_at = ca.not_after - CA_RENEW_BEFORE;
    // A serving certificate current at that time, from the same CA.
    let (_, current) = apply(&stored(&material), rotate_at - 10 * DAY);
    assert_eq!(
        plan_certificates(&stored(&current), &names(), rotate_at - SECOND).action(),
        &CertificateAction::Keep {
            renew_at: rotate_at
        }
    );

    let (action, rotated) = apply(&stored(&current), rotate_at);
    assert_eq!(
        action,
        CertificateAction::RotateCa {
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
        CertificateAction::IssueServing(ServingReason::SignedByPreviousCa)
    );
    assert!(!action.is_unexpected());
    assert_eq!(switched.ca_crt, rotated.ca_crt);
    assert_eq!(switched.ca_key, rotated.ca_key);
    assert!(serving(&switched).signed_by(&bundle[0]));
    let rotated = switched;

    // The serving certificate's renewal (8 months on) keeps both CAs in the bundle.
    let CertificateAction::Keep { renew_at } =
        *plan_certificates(&stored(&rotated), &names(), rotate_at).action()
    else {
        panic!("rotated material is current");
    };
    assert!(renew_at < ca.not_after);
    let (_, renewed) = apply(&stored(&rotated), renew_at);
    assert_eq!(renewed.ca_crt, rotated.ca_crt);

    // The old CA is dropped once it has expired, and nothing else changes.
    let prune_at = ca.not_after + SECOND;
    assert_eq!(
        plan_certificates(&stored(&renewed), &names(), renew_at).action(),
        &CertificateAction::Keep { renew_at: prune_at }
    );
    let (action, pruned) = apply(&stored(&renewed), prune_at);
    assert_eq!(action, CertificateAction::PruneBundle);
    assert!(!action.is_unexpected());
    assert_eq!(certs(&pruned.ca_crt).len(), 1);
    assert_eq!(certs(&pruned.ca_crt)[0].der, bundle[0].der);
    assert_eq!(pruned.ca_key, rotated.ca_key);
    assert_eq!(serving(&pruned).der, serving(&renewed).der);
    assert!(matches!(
        plan_certificates(&stored(&pruned), &names(), prune_at).action(),
        CertificateAction::Keep { .. }
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
    assert!(matches!(action, CertificateAction::RotateCa { .. }));
    assert_eq!(rotated.tls_crt, current.tls_crt);
}

#[test]
fn a_rotation_issues_from_the_new_ca_at_once_when_nothing_valid_serves() {
    let material = fresh(t0());
    let ca = certs(&material.ca_crt).remove(0);
    let rotate_at = ca.not_after - CA_RENEW_BEFORE;
    // The first year's serving certificate expired long ago.
    let (action, rotated) = apply(&stored(&material), rotate_at);
    assert!(matches!(action, CertificateAction::RotateCa { .. }));
    let bundle = certs(&rotated.ca_crt);
    assert!(serving(&rotated).signed_by(&bundle[0]));
    assert_eq!(serving(&rotated).not_after, rotate_at + SERVING_VALIDITY);
    assert!(matches!(
        plan_certificates(&stored(&rotated), &names(), rotate_at).action(),
        CertificateAction::Keep { .. }
    ));
}

#[test]
fn an_expired_ca_is_replaced_with_a_warning() {
    let material = fresh(t0());
    let not_after = certs(&material.ca_crt)[0].not_after;
    let (action, replaced) = apply(&stored(&material), not_after + SECOND);
    assert_eq!(
        action,
        CertificateAction::Replace(Unusable::Expired { not_after })
    );
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
    let action = plan_certificates(&stored(&material), &names(), not_before - SECOND)
        .action()
        .clone();
    assert_eq!(
        action,
        CertificateAction::Replace(Unusable::NotYetValid { not_before })
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
        let from = StoredCertificates {
            ca_crt: Some(garbage.clone()),
            ..stored(&material)
        };
        let (action, replaced) = apply(&from, t0());
        let CertificateAction::Replace(Unusable::Unreadable { key, .. }) = &action else {
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
    let from = StoredCertificates {
        ca_crt: Some(material.ca_key.clone().into_bytes()),
        ..stored(&material)
    };
    let message = plan_certificates(&from, &names(), t0())
        .action()
        .to_string();
    assert!(
        message.contains("\"PRIVATE KEY\", not a CERTIFICATE"),
        "{message}"
    );
}

#[test]
fn an_unreadable_ca_key_starts_over_but_keeps_trusting_the_old_ca_until_it_expires() {
    let material = fresh(t0());
    let from = StoredCertificates {
        ca_key: Some(b"garbage".to_vec()),
        ..stored(&material)
    };
    let (action, replaced) = apply(&from, t0());
    assert!(
        matches!(
            &action,
            CertificateAction::Replace(Unusable::Unreadable { key: "ca.key", .. })
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
    let from = StoredCertificates {
        ca_key: Some(other.ca_key.into_bytes()),
        ..stored(&material)
    };
    let action = plan_certificates(&from, &names(), t0()).action().clone();
    assert_eq!(
        action,
        CertificateAction::Replace(Unusable::KeyMatchesNoCertificate)
    );
    assert!(action.is_unexpected());
}

#[test]
fn a_serving_certificate_stored_as_the_ca_is_not_a_ca() {
    let material = fresh(t0());
    let from = StoredCertificates {
        ca_crt: Some(material.tls_crt.clone().into_bytes()),
        ca_key: Some(material.tls_key.clone().into_bytes()),
        ..stored(&material)
    };
    assert_eq!(
        plan_certificates(&from, &names(), t0()).action(),
        &CertificateAction::Replace(Unusable::NotACa)
    );
}

#[test]
fn a_missing_ca_half_starts_over() {
    let material = fresh(t0());
    let no_key = StoredCertificates {
        ca_key: None,
        ..stored(&material)
    };
    assert_eq!(
        plan_certificates(&no_key, &names(), t0()).action(),
        &CertificateAction::Replace(Unusable::Missing("ca.key"))
    );
    let no_cert = StoredCertificates {
        ca_crt: None,
        ..stored(&material)
    };
    let action = plan_certificates(&no_cert, &names(), t0()).action().clone();
    assert_eq!(
        action,
        CertificateAction::Replace(Unusable::Missing("ca.crt"))
    );
    assert!(action.is_unexpected(), "half a Secret is not a first start");
}

#[test]
fn an_unreadable_older_ca_in_the_bundle_makes_the_whole_bundle_unreadable() {
    let material = fresh(t0());
    let from = StoredCertificates {
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
        plan_certificates(&from, &names(), t0()).action(),
        CertificateAction::Replace(Unusable::Unreadable { key: "ca.crt", .. })
    ));
}

#[test]
fn the_ca_expiry_reported_is_the_signers_not_the_bundles_first() {
    let material = fresh(t0());
    let ca = certs(&material.ca_crt).remove(0);
    let rotate_at = ca.not_after - CA_RENEW_BEFORE;
    let (_, current) = apply(&stored(&material), rotate_at - 10 * DAY);
    // After the first step of a rotation the bundle leads with the new CA, while the serving
    // certificate is still the old CA's: the old one's expiry is what matters.
    let (_, rotated) = apply(&stored(&current), rotate_at);
    let expiry =
        |tls: &str, bundle: &str| inspect::signer_expiry(tls.as_bytes(), bundle.as_bytes());
    assert_eq!(
        expiry(&rotated.tls_crt, &rotated.ca_crt),
        Some(ca.not_after.as_second())
    );
    let (_, switched) = apply(&stored(&rotated), rotate_at);
    assert_eq!(
        expiry(&switched.tls_crt, &switched.ca_crt),
        Some((rotate_at + CA_VALIDITY).as_second())
    );
    assert_eq!(
        expiry(&switched.tls_crt, &fresh(t0()).ca_crt),
        None,
        "another CA"
    );
    assert_eq!(expiry("not PEM", &switched.ca_crt), None);
}
