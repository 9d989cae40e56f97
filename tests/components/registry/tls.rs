//! HTTPS registries signed by a private CA: trusted with `--ca-file`, refused without it, by the
//! client and by `ocifit artifact pull`. The registry is the in-process fake behind TLS, as the
//! test kit's registry serves plain HTTP only.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use super::fake_server::*;
use ocifit::registry::{
    ErrorKind, PrivateRegistries, Registry, RegistryFlags, RegistryOptions, RetryPolicy,
    parse_reference,
};
use ocifit_testkit::pki::CertificateAuthority;

/// The fake serving `store` over HTTPS, its certificate issued by a new private CA (returned).
async fn tls_registry(store: Store) -> (CertificateAuthority, FakeRegistry) {
    let ca = CertificateAuthority::new("ocifit test registry CA").unwrap();
    let serving = ca.issue_server("registry", &["127.0.0.1"]).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(serving.server_config().unwrap());
    let fake = FakeRegistry::start_with(
        move |r| store.serve(r),
        move |socket| {
            let acceptor = acceptor.clone();
            async move { acceptor.accept(socket).await.ok() }
        },
    )
    .await;
    (ca, fake)
}

#[tokio::test]
async fn https_registry_with_a_private_ca_is_trusted_with_the_ca_file_and_refused_without() {
    let mut store = Store::default();
    let digest = store.artifact(Some("v1"), None, OCIFIT_LAYER, b"{}", serde_json::json!({}));
    let (ca, fake) = tls_registry(store).await;
    let reference = parse_reference(&format!("{}/acme/compat:v1", fake.host)).unwrap();

    let ca_file =
        std::env::temp_dir().join(format!("ocifit-registry-tls-{}.pem", std::process::id()));
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let flags = RegistryFlags {
        ca_file: Some(ca_file.clone()),
        ..RegistryFlags::default()
    };
    let trusted = Registry::new(flags.options_for(&reference).unwrap()).unwrap();
    assert_eq!(
        trusted.fetch_artifact(&reference).await.unwrap().digest,
        digest
    );

    let untrusted = Registry::new(RegistryOptions {
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        private: PrivateRegistries::parse(&[&fake.host]).unwrap(),
        ..RegistryOptions::default()
    })
    .unwrap();
    let err = untrusted.fetch_artifact(&reference).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transport, "{err}");
    assert!(err.to_string().contains(&fake.host), "{err}");
}

#[tokio::test]
async fn artifact_pull_trusts_a_private_ca_with_ca_file_and_refuses_without() {
    let mut store = Store::default();
    let layer = "application/vnd.oci.image.layer.v1.tar";
    store.artifact(
        Some("v1"),
        None,
        layer,
        b"over tls",
        serde_json::json!({"layers": [{
            "mediaType": layer, "digest": digest(b"over tls"), "size": 8,
            "annotations": {"org.opencontainers.image.title": "tls.txt"},
        }]}),
    );
    let (ca, fake) = tls_registry(store).await;
    let work = tempfile::tempdir().unwrap();
    let ca_file = work.path().join("ca.pem");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let target = format!("{}/w/tls:v1", fake.host);
    let pull = |out: &str, extra: &[&str]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_ocifit"));
        command
            .args(["artifact", "pull", "-o", out])
            .args(extra)
            .arg(&target)
            .env_remove("DOCKER_CONFIG")
            .env("HOME", "/nonexistent");
        command.output()
    };

    let untrusted = pull(work.path().join("a").to_str().unwrap(), &[])
        .await
        .unwrap();
    assert!(!untrusted.status.success());
    let ca_flag = ["--ca-file", ca_file.to_str().unwrap()];
    let out = work.path().join("b");
    let trusted = pull(out.to_str().unwrap(), &ca_flag).await.unwrap();
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    assert_eq!(std::fs::read(out.join("tls.txt")).unwrap(), b"over tls");
}
