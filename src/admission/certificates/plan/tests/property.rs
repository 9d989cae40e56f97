//! Property: over twenty-five years of checks at random intervals (an hour to half a year apart),
//! the Secret settles in a few steps each time, every serving certificate it ever held stays
//! trusted by the bundle until it expires (no replica still serving one is cut off by a renewal
//! or a rotation), the serving certificate is current whenever the plan keeps, and the bundle
//! never grows beyond two CAs.

use proptest::prelude::*;

use super::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn every_served_certificate_stays_trusted_until_it_expires(
        steps in prop::collection::vec(1i64..=4380, 40..80),
    ) {
        let mut now = t0();
        let end = t0() + 25 * 365 * DAY;
        let mut secret = StoredCertificates::default();
        let mut served: Vec<String> = Vec::new();
        for hours in steps.iter().cycle() {
            if now > end {
                break;
            }
            let mut settled = false;
            for _ in 0..3 {
                let plan = plan_certificates(&secret, &names(), now);
                let Some(material) = plan.carry_out(now).unwrap() else {
                    settled = true;
                    break;
                };
                secret = stored(&material);
                served.push(material.tls_crt);
            }
            prop_assert!(settled, "not settled at {now}");
            let bundle = String::from_utf8(secret.ca_crt.clone().unwrap()).unwrap();
            prop_assert!(certs(&bundle).len() <= 2);
            served.retain(|tls| now <= certs(tls)[0].not_after);
            for tls in &served {
                prop_assert!(trusted(&bundle, tls), "a valid certificate untrusted at {now}");
            }
            let current = certs(&String::from_utf8(secret.tls_crt.clone().unwrap()).unwrap()).remove(0);
            prop_assert!(current.not_before <= now && now < current.not_after);
            now += SignedDuration::from_hours(*hours);
        }
    }
}
