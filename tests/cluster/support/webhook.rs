//! `ocifit run` serving the pod webhook to the apiserver, as the webhook scenarios set it up:
//! the seed's flavors with a node each, a CA and a serving certificate written for the process,
//! replicas started with them, and a webhook configuration that is active once a probe pod is
//! admitted with its flavor's image.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::pod::ENABLED_LABEL;
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{PodWebhook, register_pod_webhook};

use super::objects::{OptIn, TestPod, linux_node};
use super::{Controller, Env, FLAVOR, free_address, get};

/// The name of placement's gate webhook in the configurations the scenarios register: both of
/// ocifit's configurations name their webhook `pods.ocifit.io`, and the apiserver's duration
/// histogram is by webhook name.
pub const GATE: &str = "gate.ocifit.io";

/// How long a new webhook configuration may take to admit the probe.
const ACTIVE_WITHIN: Duration = Duration::from_secs(30);

/// The first container's image.
pub fn image(pod: &Pod) -> &str {
    pod.spec.as_ref().expect("a spec").containers[0]
        .image
        .as_deref()
        .unwrap_or_default()
}

/// The sum of every `ocifit_admissions_total` series of `controller`.
pub async fn admissions(controller: &Controller) -> f64 {
    let (_, body) = get(&controller.admin, "/metrics").await.expect("/metrics");
    body.lines()
        .filter(|l| l.starts_with("ocifit_admissions_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

impl Env {
    /// Pushes the seed's flavors ([`Env::push_flavors`]), adds a node `<flavor>-1` for each and
    /// creates `namespace`; each flavor's image.
    pub async fn flavors_with_nodes(&self, namespace: &str) -> BTreeMap<&'static str, String> {
        let [debian, ubuntu, rocky] = self.push_flavors().await;
        let by_flavor = BTreeMap::from([
            ("vanilla", debian),
            ("chocolate", ubuntu),
            ("strawberry", rocky),
        ]);
        for flavor in by_flavor.keys() {
            self.add_node(linux_node(&format!("{flavor}-1")).label(FLAVOR, flavor))
                .await;
        }
        ocifit_testkit::create_namespace(&self.client, namespace)
            .await
            .expect("the namespace");
        by_flavor
    }

    /// [`Env::flavors_with_nodes`] in `namespace`, then `ocifit run` (`identity`, given `extra`
    /// flags) serving its webhooks on a free loopback address with a new certificate.
    pub async fn serve_flavors(&self, namespace: &str, identity: &str, extra: &[&str]) -> Serving {
        let by_flavor = self.flavors_with_nodes(namespace).await;
        let certificate = WebhookCertificate::issue(self, &["127.0.0.1"]);
        let address = free_address();
        let controller = certificate.serve(self, identity, &address, extra).await;
        Serving {
            by_flavor,
            certificate,
            address,
            controller,
        }
    }
}

/// `ocifit run` serving its webhooks over the seed's flavors ([`Env::serve_flavors`]).
pub struct Serving {
    /// Each flavor's image.
    pub by_flavor: BTreeMap<&'static str, String>,
    pub certificate: WebhookCertificate,
    /// Where the webhooks are served.
    pub address: String,
    pub controller: Controller,
}

/// A CA and the serving certificate it issued, written to files `ocifit run` reads.
pub struct WebhookCertificate {
    pub ca: CertificateAuthority,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl WebhookCertificate {
    /// A new CA and a serving certificate for `names` (IP addresses and DNS names), written
    /// into the cluster's directory.
    pub fn issue(env: &Env, names: &[&str]) -> WebhookCertificate {
        let ca = CertificateAuthority::new("ocifit webhook CA").expect("a CA");
        let serving = ca
            .issue_server("ocifit-webhook", names)
            .expect("a serving certificate");
        let (cert, key) = (
            env.cluster.dir().join("webhook.crt"),
            env.cluster.dir().join("webhook.key"),
        );
        std::fs::write(&cert, &serving.cert_pem).expect("the certificate file");
        std::fs::write(&key, &serving.key_pem).expect("the key file");
        WebhookCertificate { ca, cert, key }
    }

    /// Starts `ocifit run` serving the webhook on `address` with this certificate, and `extra`
    /// flags; returns once it is ready.
    pub async fn serve(
        &self,
        env: &Env,
        identity: &str,
        address: &str,
        extra: &[&str],
    ) -> Controller {
        let (cert, key) = (
            self.cert.display().to_string(),
            self.key.display().to_string(),
        );
        let mut flags = vec![
            "--webhook-bind-address",
            address,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
        ];
        flags.extend_from_slice(extra);
        Controller::start(env, identity, &flags).await
    }

    /// Registers `/mutate` on `address` (served with this certificate) as the configuration
    /// `name` for the opted-in pods of `namespace`, and waits until it admits a vanilla probe with
    /// `vanilla` (the vanilla flavor's image); the probe.
    pub async fn activate_mutate(
        &self,
        env: &Env,
        name: &str,
        address: &str,
        namespace: &str,
        vanilla: &str,
    ) -> Pod {
        let webhook = PodWebhook::new(
            name,
            &format!("https://{address}/mutate"),
            self.ca.cert_pem(),
        )
        .match_label(ENABLED_LABEL, "true")
        .in_namespace(namespace);
        let probe = TestPod::named("probe")
            .opted_in()
            .node_selector(FLAVOR, "vanilla")
            .build();
        activate(env, &webhook.to_configuration(), namespace, &probe, vanilla).await;
        probe
    }

    /// Registers placement's gate (`/placement` on `address`) as the configuration `name` for
    /// every pod of `namespace`, its webhook named [`GATE`].
    pub async fn register_gate(&self, env: &Env, name: &str, address: &str, namespace: &str) {
        let gate = PodWebhook::new(
            name,
            &format!("https://{address}/placement"),
            self.ca.cert_pem(),
        )
        .named(GATE)
        .in_namespace(namespace);
        register_pod_webhook(&env.client, &gate)
            .await
            .expect("the gate's configuration");
    }
}

/// Creates `configuration` and waits until the apiserver admits `probe` (a dry run, in
/// `namespace`) with `expected` as its image: the webhook is active.
pub async fn activate(
    env: &Env,
    configuration: &MutatingWebhookConfiguration,
    namespace: &str,
    probe: &Pod,
    expected: &str,
) {
    Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .create(&PostParams::default(), configuration)
        .await
        .expect("the webhook configuration");
    ocifit_testkit::wait_until_admitted(&env.client, namespace, probe, ACTIVE_WITHIN, |p| {
        image(p) == expected
    })
    .await
    .expect("the webhook active");
}
