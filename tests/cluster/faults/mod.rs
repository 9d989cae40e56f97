//! The fault suite: `ocifit run` serving its webhook to a real apiserver while things go wrong,
//! each scenario printing its figures (`FAULT …` lines): the registry down while 500 opted-in
//! pods are created (none denied); kube-apiserver killed and started again (the webhook answers
//! meanwhile, status converges after); hostile requests sent straight to the webhook from
//! loopback (every answer within the deadline, resident memory under the chart's limit, the
//! next well-formed request answered normally).

mod apiserver_restart;
mod hostile;
mod registry_down;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::pod::ENABLED_LABEL;
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{PodWebhook, register_pod_webhook, wait_until_admitted};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::support::objects::{TestPod, linux_node};
use crate::support::{Controller, Env, FLAVOR, free_address};

const NAMESPACE: &str = "faults";
const WAIT: Duration = Duration::from_secs(30);

/// A cluster with the flavor policy Ready and `ocifit run` serving the webhook for opted-in pods
/// of [`NAMESPACE`].
pub struct Served {
    pub env: Env,
    pub controller: Controller,
    pub ca: CertificateAuthority,
    pub webhook_address: String,
    pub by_flavor: BTreeMap<&'static str, String>,
    _files: (PathBuf, PathBuf),
}

impl Served {
    pub async fn start(identity: &str) -> Served {
        let env = Env::start().await;
        let [debian, ubuntu, rocky] = env.push_flavors().await;
        let by_flavor = BTreeMap::from([
            ("vanilla", debian),
            ("chocolate", ubuntu),
            ("strawberry", rocky),
        ]);
        for flavor in by_flavor.keys() {
            env.add_node(linux_node(&format!("{flavor}-1")).label(FLAVOR, flavor))
                .await;
        }
        ocifit_testkit::create_namespace(&env.client, NAMESPACE)
            .await
            .expect("the namespace");
        let ca = CertificateAuthority::new("ocifit faults CA").expect("a CA");
        let serving = ca
            .issue_server("ocifit-webhook", &["127.0.0.1"])
            .expect("a serving certificate");
        let cert = env.cluster.dir().join("webhook.crt");
        let key = env.cluster.dir().join("webhook.key");
        std::fs::write(&cert, &serving.cert_pem).expect("the certificate file");
        std::fs::write(&key, &serving.key_pem).expect("the key file");
        let webhook_address = free_address();
        let controller = Controller::start(
            &env,
            identity,
            &[
                "--webhook-bind-address",
                &webhook_address,
                "--tls-cert-file",
                &cert.display().to_string(),
                "--tls-key-file",
                &key.display().to_string(),
            ],
        )
        .await;
        env.create_policy(&env.flavor_policy("flavors")).await;
        env.wait_ready("flavors").await;
        let webhook = PodWebhook::new(
            "ocifit-faults",
            &format!("https://{webhook_address}/mutate"),
            ca.cert_pem(),
        )
        .match_label(ENABLED_LABEL, "true")
        .in_namespace(NAMESPACE);
        register_pod_webhook(&env.client, &webhook)
            .await
            .expect("the webhook configuration");
        let served = Served {
            env,
            controller,
            ca,
            webhook_address,
            by_flavor,
            _files: (cert, key),
        };
        let probe = flavored("probe", "vanilla");
        let vanilla = served.by_flavor["vanilla"].clone();
        wait_until_admitted(&served.env.client, NAMESPACE, &probe, WAIT, |p| {
            image(p) == vanilla
        })
        .await
        .expect("the webhook active");
        served
    }

    /// Creates `pod` through the apiserver: its image, or the error.
    pub async fn create(&self, pod: &Pod) -> Result<String, kube::Error> {
        Api::<Pod>::namespaced(self.env.client.clone(), NAMESPACE)
            .create(&PostParams::default(), pod)
            .await
            .map(|stored| image(&stored).to_owned())
    }

    /// A TLS connector trusting the webhook's CA.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        ocifit_testkit::pki::install_crypto_provider();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca.cert_pem().as_bytes()).expect("the CA"))
            .expect("a root");
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// The process's (current, peak) resident memory in KiB.
    pub fn rss_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.controller.pid()))
            .expect("the process status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

/// An opted-in pod for nodes of `flavor`.
pub fn flavored(name: &str, flavor: &str) -> Pod {
    TestPod::named(name)
        .opted_in()
        .node_selector(FLAVOR, flavor)
        .build()
}

pub fn image(pod: &Pod) -> &str {
    pod.spec.as_ref().expect("a spec").containers[0]
        .image
        .as_deref()
        .unwrap_or_default()
}
