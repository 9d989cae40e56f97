//! The webhook port closed to every client but the apiserver: kube-apiserver started with an
//! admission configuration whose kubeConfigFile gives it a client certificate for webhooks, and
//! `ocifit run --webhook-client-ca` with that certificate's CA. Opted-in pods created through the
//! apiserver are admitted with their flavor's image; a client without a certificate, or with
//! one from another CA, is refused at the TLS handshake.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit_testkit::Cluster;
use ocifit_testkit::pki::CertificateAuthority;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::support::objects::{OptIn, TestPod};
use crate::support::webhook::{Serving, image};
use crate::support::{Env, FLAVOR};

const NAMESPACE: &str = "client-certificates";

#[tokio::test]
async fn with_a_client_ca_only_the_apiserver_reaches_the_webhook() {
    ocifit_testkit::pki::install_crypto_provider();
    // The apiserver's client certificate for webhooks, from a CA of its own.
    let files = tempfile::tempdir().expect("a directory");
    let clients = CertificateAuthority::new("apiserver webhook clients").expect("a CA");
    let apiserver = clients
        .issue_client("kube-apiserver", None)
        .expect("a client certificate");
    let path = |name: &str| files.path().join(name).display().to_string();
    std::fs::write(path("client.crt"), &apiserver.cert_pem).expect("written");
    std::fs::write(path("client.key"), &apiserver.key_pem).expect("written");
    std::fs::write(path("clients-ca.crt"), clients.cert_pem()).expect("written");
    // `*`: every webhook the apiserver calls presents it.
    std::fs::write(
        path("webhook-kubeconfig.yaml"),
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    \
             client-certificate: {}\n    client-key: {}\n",
            path("client.crt"),
            path("client.key")
        ),
    )
    .expect("written");
    std::fs::write(
        path("admission.yaml"),
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n\
             - name: MutatingAdmissionWebhook\n  configuration:\n    \
             apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    \
             kubeConfigFile: {}\n",
            path("webhook-kubeconfig.yaml")
        ),
    )
    .expect("written");
    let env = Env::start_with(
        crate::support::ocifit_binary(),
        Cluster::builder().apiserver_arg(format!(
            "--admission-control-config-file={}",
            path("admission.yaml")
        )),
    )
    .await;

    let client_ca = path("clients-ca.crt");
    let Serving {
        by_flavor,
        certificate,
        address,
        controller: _controller,
    } = env
        .serve_flavors(
            NAMESPACE,
            "client-certificates",
            &["--webhook-client-ca", &client_ca],
        )
        .await;
    env.create_policy(&env.flavor_policy("flavors")).await;
    env.wait_ready("flavors").await;
    certificate
        .activate_mutate(
            &env,
            "ocifit-client-certificates",
            &address,
            NAMESPACE,
            &by_flavor["vanilla"],
        )
        .await;
    let pod = TestPod::named("admitted")
        .opted_in()
        .node_selector(FLAVOR, "chocolate")
        .build();
    let stored = Api::<Pod>::namespaced(env.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &pod)
        .await
        .expect("admitted through the apiserver's certificate");
    assert_eq!(image(&stored), by_flavor["chocolate"]);

    let server_ca = certificate.ca.cert_pem();
    let without = exchange(&address, connector(server_ca, None)).await;
    let other = CertificateAuthority::new("someone else").expect("a CA");
    let foreign = other.issue_client("mallory", None).expect("a certificate");
    let with_foreign = exchange(
        &address,
        connector(server_ca, Some((&foreign.cert_pem, &foreign.key_pem))),
    )
    .await;
    let with_apiservers = exchange(
        &address,
        connector(server_ca, Some((&apiserver.cert_pem, &apiserver.key_pem))),
    )
    .await;
    eprintln!(
        "client certificates: without one: {without:?}; from another CA: {with_foreign:?}; \
         the apiserver's: {with_apiservers:?}"
    );
    assert!(without.is_err(), "{without:?}");
    assert!(with_foreign.is_err(), "{with_foreign:?}");
    assert!(
        with_apiservers
            .as_deref()
            .is_ok_and(|s| s.starts_with("HTTP/1.1 200")),
        "{with_apiservers:?}"
    );
}

/// A connector trusting `server_ca`, presenting `client` (certificate and key PEM) when given.
fn connector(server_ca: &str, client: Option<(&str, &str)>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(server_ca.as_bytes()).expect("the CA"))
        .expect("a root");
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("a chain"),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("a key"),
            )
            .expect("a client configuration"),
    };
    TlsConnector::from(Arc::new(config))
}

/// An empty review POSTed straight to the webhook: the status line, or where it failed (with TLS
/// 1.3 a refused client certificate shows on the first read).
async fn exchange(address: &str, connector: TlsConnector) -> Result<String, String> {
    let tcp = TcpStream::connect(address)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let name = ServerName::try_from("127.0.0.1").expect("a name");
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let request = "POST /mutate HTTP/1.1\r\nHost: webhook\r\nContent-Length: 2\r\n\
                   Connection: close\r\n\r\n{}";
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    text.lines()
        .next()
        .filter(|l| l.starts_with("HTTP/"))
        .map(str::to_owned)
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))
}
