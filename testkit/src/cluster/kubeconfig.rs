//! The admin kubeconfig: one document, written for kubectl, Helm and the control plane's own
//! components, and loaded by kube from the same text, so every client sees the same credentials.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{Error, Result};
use crate::pki::IssuedCert;

const CONTEXT: &str = "ocifit-test";
const USER: &str = "ocifit-admin";

/// The kubeconfig YAML for `server`, trusting `ca_pem` and authenticating with `client`.
pub(crate) fn render(server: &str, ca_pem: &str, client: &IssuedCert) -> Result<String> {
    let document = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": CONTEXT,
            "cluster": {"server": server, "certificate-authority-data": STANDARD.encode(ca_pem)},
        }],
        "users": [{
            "name": USER,
            "user": {
                "client-certificate-data": STANDARD.encode(&client.cert_pem),
                "client-key-data": STANDARD.encode(&client.key_pem),
            },
        }],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": USER}}],
        "current-context": CONTEXT,
    });
    serde_saphyr::to_string(&document).map_err(|e| Error::Format {
        action: "write the kubeconfig".into(),
        message: e.to_string(),
    })
}

/// The kube client configuration the kubeconfig `yaml` describes.
pub(crate) async fn load(yaml: &str) -> Result<kube::Config> {
    let kubeconfig = Kubeconfig::from_yaml(yaml).map_err(Error::Kubeconfig)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(Error::Kubeconfig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{CertificateAuthority, install_crypto_provider};

    #[tokio::test]
    async fn rendered_kubeconfig_loads_with_the_server_and_credentials() {
        install_crypto_provider();
        let ca = CertificateAuthority::new("ca").unwrap();
        let admin = ca.issue_client("admin", Some("system:masters")).unwrap();
        let yaml = render("https://127.0.0.1:6443", ca.cert_pem(), &admin).unwrap();

        let config = load(&yaml).await.unwrap();

        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.root_cert.as_ref().map(Vec::len), Some(1));
        assert!(config.auth_info.client_certificate_data.is_some());
    }
}
