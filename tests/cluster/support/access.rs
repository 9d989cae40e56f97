//! Reaching the cluster and a webhook as someone other than the cluster's admin: a kubeconfig that
//! authenticates with one ServiceAccount's token only, and a TLS client that trusts only a given CA
//! bundle.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::Client;
use ocifit_testkit::Cluster;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

/// A kubeconfig for `cluster` that authenticates with a fresh token of the ServiceAccount
/// `namespace/account` and nothing else; written into the cluster's directory.
pub async fn service_account_kubeconfig(
    cluster: &Cluster,
    namespace: &str,
    account: &str,
) -> PathBuf {
    let client = cluster.client().expect("a client");
    let token = ocifit_testkit::service_account_token(&client, namespace, account)
        .await
        .expect("a token");
    let admin = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).expect("kubeconfig");
    let server = admin
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .expect("a cluster");
    let mut cluster_json = serde_json::json!({"server": server.server});
    if let Some(data) = server.certificate_authority_data {
        cluster_json["certificate-authority-data"] = data.into();
    }
    if let Some(file) = server.certificate_authority {
        cluster_json["certificate-authority"] = file.into();
    }
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster_json}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": account}}],
        "current-context": "sa",
    });
    let path = cluster
        .dir()
        .join(format!("{namespace}-{account}.kubeconfig"));
    std::fs::write(&path, config.to_string()).expect("a kubeconfig file");
    path
}

/// A client that authenticates as the kubeconfig says.
pub async fn client_from(kubeconfig: &Path) -> Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).expect("the kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("a config");
    Client::try_from(config).expect("a client")
}

/// A TLS handshake with `address` as a client that trusts only the certificates of `ca_bundle`
/// (PEM) and expects the name `host` (a DNS name or an IP address), without session resumption
/// so each handshake sees what the server presents now; the leaf certificate the server
/// presented, or the error the client saw.
pub async fn handshake(
    address: &str,
    ca_bundle: &str,
    host: &str,
) -> Result<CertificateDer<'static>, String> {
    ocifit_testkit::pki::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_bundle.as_bytes()) {
        roots
            .add(cert.expect("a PEM certificate"))
            .expect("a trusted CA");
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = TcpStream::connect(address).await.expect("a connection");
    let name = ServerName::try_from(host.to_owned()).expect("a DNS name or an IP address");
    let tls = connector
        .connect(name, stream)
        .await
        .map_err(|e| e.to_string())?;
    let peer = tls.get_ref().1.peer_certificates().expect("certificates");
    Ok(peer[0].clone().into_owned())
}
