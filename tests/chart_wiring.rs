//! The chart's wiring against the real binary: `helm install` with default values (managed TLS)
//! on the real local control plane, then `ocifit run` started on this host with exactly the
//! container arguments and environment of the stored Deployment (downward-API values resolved by
//! hand, the two bind addresses swapped for free loopback ports), authenticated only as the
//! chart's ServiceAccount. It must become ready, take the chart's Lease, create the Secret the
//! chart names with a serving certificate for the chart's Service, patch the caBundle of the
//! chart's webhook configuration so that it verifies the certificate the webhook serves, and
//! never be refused by the chart's RBAC. So the chart's flags, names and RBAC agree with the
//! binary. Its own cluster: the install is cluster-wide (CRD, ClusterRole, webhook
//! configuration), like the one in `chart_cluster.rs`.

mod chart_support;
mod controller_support;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chart_support::{NAMESPACE, RELEASE, chart, helm};
use controller_support::{free_address, get};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Container, Secret, Service, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use ocifit_testkit::Cluster;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio::process::Command;

/// The pod name the downward API would give this replica.
const POD_NAME: &str = "ocifit-controller-7d9f8-wiring";
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn ocifit_run_with_the_charts_arguments_under_its_service_account_serves_a_trusted_certificate()
 {
    let cluster = Cluster::builder().start().await.expect("a local cluster");
    let client = cluster.client().expect("a client");
    helm(
        &[
            "install",
            RELEASE,
            chart().to_str().expect("a UTF-8 path"),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
        ],
        Some(cluster.kubeconfig()),
    )
    .await
    .expect("helm install with default values");

    let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get("ocifit-controller")
        .await
        .expect("the chart's Deployment");
    let pod = deployment
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod template");
    let container = &pod.containers[0];
    // No command: the image's entrypoint is the binary itself.
    assert_eq!(container.command, None);
    let admin = free_address();
    let webhook = free_address();
    let args = with_bind_addresses(container, &admin, &webhook);
    let env = resolved_env(container, NAMESPACE);
    let account = pod.service_account_name.expect("a ServiceAccount");

    let token = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create_token_request(
            &account,
            &PostParams::default(),
            &TokenRequest {
                spec: Some(TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                }),
                ..TokenRequest::default()
            },
        )
        .await
        .expect("a token for the chart's ServiceAccount")
        .status
        .expect("a token status")
        .token
        .expect("a token");
    let kubeconfig = token_kubeconfig(&cluster, &account, &token);

    // The pod's environment only, plus where the in-cluster configuration would come from.
    let log = cluster.dir().join("ocifit-chart-wiring.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ocifit"))
        .args(&args)
        .env_clear()
        .envs(env)
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .kill_on_drop(true)
        .spawn()
        .expect("ocifit run");
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    let start = Instant::now();
    while get(&admin, "/readyz").await.map(|(code, _)| code) != Some(200) {
        assert!(
            start.elapsed() < WAIT,
            "not ready within {WAIT:?} with the chart's arguments {args:?}; log:\n{}",
            log_text()
        );
        if let Ok(Some(status)) = child.try_wait() {
            panic!("ocifit run exited ({status}); log:\n{}", log_text());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The chart's Lease, held under the downward-API pod name.
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get("ocifit-controller")
        .await
        .expect("the chart's Lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(POD_NAME)
    );

    // The webhook configuration calls the chart's Service; the certificate must carry its names.
    let configuration = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get("ocifit")
        .await
        .expect("the chart's webhook configuration");
    let hooks = configuration.webhooks.expect("webhooks");
    let service_ref = hooks[0]
        .client_config
        .service
        .clone()
        .expect("a Service reference");
    assert_eq!(service_ref.namespace, NAMESPACE);
    let service = Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .get(&service_ref.name)
        .await
        .expect("the Service the webhook configuration calls");
    let service = service.metadata.name.expect("a name");
    assert_eq!(service, "ocifit-webhook");

    let secret = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .get("ocifit-webhook-tls")
        .await
        .expect("the Secret the chart names (tls.managed.secretName)");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let ca = data(&secret, "ca.crt");
    let served_chain = data(&secret, "tls.crt");

    // Every webhook's caBundle is the Secret's CA.
    for hook in &hooks {
        let bundle = hook.client_config.ca_bundle.as_ref().map(|b| b.0.clone());
        assert_eq!(
            bundle.as_deref(),
            Some(ca.as_bytes()),
            "caBundle of {}",
            hook.name
        );
    }

    // The webhook serves the Secret's certificate, and a client that trusts only the caBundle
    // accepts it under every DNS name of the Service, the one the apiserver dials included.
    let leaf = CertificateDer::pem_slice_iter(served_chain.as_bytes())
        .next()
        .expect("a certificate in tls.crt")
        .expect("a PEM certificate");
    for name in [
        service.clone(),
        format!("{service}.{NAMESPACE}"),
        format!("{service}.{NAMESPACE}.svc"),
        format!("{service}.{NAMESPACE}.svc.cluster.local"),
    ] {
        let peer = handshake(&webhook, &ca, &name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(peer, leaf, "{name}: the served certificate is the Secret's");
    }
    let wrong = handshake(&webhook, &ca, "ocifit-webhook.elsewhere.svc").await;
    assert!(wrong.is_err(), "a name the certificate lacks is refused");

    let text = log_text().to_lowercase();
    assert!(!text.contains("forbidden"), "{text}");

    let pid = child.id().expect("a running process");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("ocifit run exits after SIGTERM")
        .expect("an exit status");
    assert!(status.success(), "{status}; log:\n{}", log_text());
}

/// The container's arguments with the values of `--admin-bind-address=` and
/// `--webhook-bind-address=` replaced (clap refuses a repeated flag, and a flag outranks its
/// environment variable, so they cannot be overridden by appending); every other argument as
/// the chart gives it.
fn with_bind_addresses(container: &Container, admin: &str, webhook: &str) -> Vec<String> {
    let mut replaced = 0;
    let args: Vec<String> = container
        .args
        .clone()
        .expect("the container's args")
        .into_iter()
        .map(|arg| {
            for (flag, address) in [
                ("--admin-bind-address=", admin),
                ("--webhook-bind-address=", webhook),
            ] {
                if arg.starts_with(flag) {
                    replaced += 1;
                    return format!("{flag}{address}");
                }
            }
            arg
        })
        .collect();
    assert_eq!(replaced, 2, "both bind addresses in {args:?}");
    assert_eq!(args[0], "run");
    args
}

/// The container's environment as the kubelet would set it: literal values, and the downward
/// API's pod name and namespace.
fn resolved_env(container: &Container, namespace: &str) -> Vec<(String, String)> {
    let env = container.env.clone().unwrap_or_default();
    let resolved: Vec<(String, String)> = env
        .into_iter()
        .map(|var| {
            let value = match (var.value, var.value_from) {
                (Some(value), None) => value,
                (None, Some(from)) => {
                    let field = from.field_ref.expect("only fieldRef values").field_path;
                    match field.as_str() {
                        "metadata.name" => POD_NAME.to_owned(),
                        "metadata.namespace" => namespace.to_owned(),
                        other => panic!("{}: unexpected downward-API field {other}", var.name),
                    }
                }
                other => panic!("{}: unexpected value {other:?}", var.name),
            };
            (var.name, value)
        })
        .collect();
    let names: Vec<&str> = resolved.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"POD_NAME") && names.contains(&"POD_NAMESPACE"),
        "{names:?}"
    );
    resolved
}

/// A kubeconfig for the cluster that authenticates as `account` with `token` only.
fn token_kubeconfig(cluster: &Cluster, account: &str, token: &str) -> PathBuf {
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
    let path = cluster.dir().join("chart-service-account.kubeconfig");
    std::fs::write(&path, config.to_string()).expect("a kubeconfig file");
    path
}

fn data(secret: &Secret, key: &str) -> String {
    let bytes = &secret.data.as_ref().expect("Secret data")[key].0;
    String::from_utf8(bytes.clone()).expect("UTF-8 PEM")
}

/// A TLS handshake with `address` trusting only `ca_bundle` and expecting the name `host`; the
/// leaf certificate the server presented, or the error the client saw.
async fn handshake(
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
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = TcpStream::connect(address).await.expect("a connection");
    let name = ServerName::try_from(host.to_owned()).expect("a DNS name");
    let tls = connector
        .connect(name, stream)
        .await
        .map_err(|e| e.to_string())?;
    let peer = tls.get_ref().1.peer_certificates().expect("certificates");
    Ok(peer[0].clone().into_owned())
}
