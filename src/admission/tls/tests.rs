use std::time::Duration;

use ocifit_testkit::pki::CertificateAuthority;

use super::*;

fn pair(name: &str) -> (String, String) {
    let ca = CertificateAuthority::new("test CA").unwrap();
    let cert = ca.issue_server(name, &["127.0.0.1"]).unwrap();
    (cert.cert_pem, cert.key_pem)
}

#[test]
fn starts_empty_and_loads_a_matching_pair() {
    let cert = ServingCert::new();
    assert!(!cert.is_loaded());
    let (c, k) = pair("a");
    cert.set_pem(c.as_bytes(), k.as_bytes()).unwrap();
    assert!(cert.is_loaded());
}

#[test]
fn a_key_of_another_certificate_is_refused_and_the_old_pair_kept() {
    let cert = ServingCert::new();
    let (c1, k1) = pair("a");
    let (c2, k2) = pair("b");
    cert.set_pem(c1.as_bytes(), k1.as_bytes()).unwrap();
    let before = cert.current.load_full().unwrap();
    let err = cert.set_pem(c2.as_bytes(), k1.as_bytes()).unwrap_err();
    assert!(matches!(err, TlsError::Mismatch(_)), "{err}");
    assert!(Arc::ptr_eq(&before, &cert.current.load_full().unwrap()));
    cert.set_pem(c2.as_bytes(), k2.as_bytes()).unwrap();
    assert!(!Arc::ptr_eq(&before, &cert.current.load_full().unwrap()));
}

#[test]
fn garbage_and_empty_pems_are_refused_with_what_is_wrong() {
    let cert = ServingCert::new();
    let (c, k) = pair("a");
    assert!(matches!(
        cert.set_pem(b"", k.as_bytes()),
        Err(TlsError::NoCertificate)
    ));
    assert!(matches!(
        cert.set_pem(c.as_bytes(), b"not a key"),
        Err(TlsError::KeyPem(_))
    ));
    assert!(!cert.is_loaded());
}

#[test]
fn a_server_configuration_builds_even_while_empty() {
    let config = ServingCert::server_config(ServingCert::new()).unwrap();
    assert!(config.alpn_protocols.contains(&b"http/1.1".to_vec()));
}

#[tokio::test]
async fn the_watcher_loads_changed_files_and_keeps_the_old_pair_on_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = CertFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let (c1, k1) = pair("a");
    std::fs::write(&files.cert, &c1).unwrap();
    std::fs::write(&files.key, &k1).unwrap();
    let cert = ServingCert::new();
    let watcher = tokio::spawn(
        files
            .clone()
            .watch(Arc::clone(&cert), Duration::from_millis(10)),
    );
    let loaded = |cert: &ServingCert| cert.current.load_full();
    let first = wait_for(|| loaded(&cert)).await;

    // A key that does not match: the first pair stays.
    let (c2, k2) = pair("b");
    std::fs::write(&files.cert, &c2).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(Arc::ptr_eq(&first, &loaded(&cert).unwrap()));

    // The matching key arrives: the second pair is served.
    std::fs::write(&files.key, &k2).unwrap();
    wait_for(|| loaded(&cert).filter(|now| !Arc::ptr_eq(&first, now))).await;
    watcher.abort();
}

async fn wait_for<T>(mut found: impl FnMut() -> Option<T>) -> T {
    for _ in 0..500 {
        if let Some(value) = found() {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not seen within 5s");
}

#[test]
fn the_served_certificates_expiry_is_reported_and_a_refused_one_changes_nothing() {
    let metrics = Metrics::new(None);
    let cert = ServingCert::reporting(Arc::clone(&metrics));
    let (c, k) = pair("a");
    let (_, leaf) =
        X509Certificate::from_der(&CertificateDer::from_pem_slice(c.as_bytes()).unwrap())
            .map(|(rest, leaf)| (rest.len(), leaf.validity().not_after.timestamp()))
            .unwrap();
    cert.set_pem(c.as_bytes(), k.as_bytes()).unwrap();
    let series = |text: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(
                    "ocifit_certificate_expiry_timestamp_seconds{certificate=\"serving\"} ",
                )
            })
            .map(str::to_owned)
    };
    let reported = series(&metrics.encode().unwrap());
    assert_eq!(reported, Some(format!("{leaf}.0")));
    let (other, _) = pair("b");
    assert!(cert.set_pem(other.as_bytes(), k.as_bytes()).is_err());
    assert_eq!(series(&metrics.encode().unwrap()), reported);
    cert.signed_by_ca_until(2_000_000_000);
    assert!(
        metrics.encode().unwrap().contains(
            "ocifit_certificate_expiry_timestamp_seconds{certificate=\"ca\"} 2000000000.0"
        )
    );
}
