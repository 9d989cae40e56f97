//! The chart's wiring against the real binary: `helm install` on the real local control plane,
//! then `ocifit run` started on this host with exactly the container arguments and environment of
//! the stored Deployment (downward-API values resolved by hand, the two bind addresses swapped for
//! free ports), authenticated only as the chart's ServiceAccount. With default values (managed
//! TLS) it becomes ready, takes the chart's Lease, creates the Secret the chart names with a
//! serving certificate for the chart's Service, patches the caBundle of the chart's webhook
//! configuration so that it verifies the certificate served, and is never refused by the chart's
//! RBAC. With the apiserver routing webhook calls to a Service's endpoints
//! (`--enable-aggregator-routing=true`) and an EndpointSlice pointing the chart's Service at this
//! host, a labelled pod gets its image through the chart's webhook configuration. So the chart's flags, names and RBAC
//! agree with the binary. Each test has its own cluster: the install is cluster-wide (CRD,
//! ClusterRole, webhook configuration).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::PostParams;
use kube::{Api, Client};
use ocifit_testkit::chart::NAMESPACE;
use ocifit_testkit::{Cluster, Registry, create_namespace, host_ipv4, wait_until_admitted};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::support::access::{handshake, service_account_kubeconfig};
use crate::support::chart_pod::{ChartPod, POD_NAME, Replica, install};
use crate::support::objects::{OptIn, PLACEHOLDER, TestPod, linux_node};
use crate::support::{Env, FLAVOR, data, free_address, images};

#[tokio::test]
async fn ocifit_run_with_the_charts_arguments_under_its_service_account_serves_a_trusted_certificate()
 {
    let cluster = Cluster::builder().start().await.expect("a local cluster");
    let client = cluster.client().expect("a client");
    install(&cluster, &[]).await;

    let admin = free_address();
    let webhook = free_address();
    let pod = ChartPod::stored(&client)
        .await
        .with_bind_addresses(&admin, &webhook);
    let kubeconfig = service_account_kubeconfig(&cluster, NAMESPACE, &pod.account).await;
    let replica = Replica::start(
        Path::new(crate::support::ocifit_binary()),
        &pod,
        &kubeconfig,
        &admin,
        cluster.dir().join("ocifit-chart-wiring.log"),
    )
    .await;

    it_holds_the_charts_lease_under_the_downward_api_pod_name(&client).await;
    let (hooks, service) = the_webhook_configuration_calls_the_charts_service(&client).await;
    let secret = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .get("ocifit-webhook-tls")
        .await
        .expect("the Secret the chart names (tls.managed.secretName)");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    every_ca_bundle_is_the_secrets_ca(&hooks, &secret);
    it_serves_the_secrets_certificate_under_every_name_of_the_service(&webhook, &secret, &service)
        .await;

    let log = replica.log_text().to_lowercase();
    assert!(!log.contains("forbidden"), "{log}");
    replica.stop().await;
}

async fn it_holds_the_charts_lease_under_the_downward_api_pod_name(client: &Client) {
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get("ocifit-controller")
        .await
        .expect("the chart's Lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(POD_NAME)
    );
}

/// The certificate must carry the Service's names. Returns the webhooks and the Service's name.
async fn the_webhook_configuration_calls_the_charts_service(
    client: &Client,
) -> (Vec<MutatingWebhook>, String) {
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
        .expect("the Service the webhook configuration calls")
        .metadata
        .name
        .expect("a name");
    assert_eq!(service, "ocifit-webhook");
    (hooks, service)
}

fn every_ca_bundle_is_the_secrets_ca(hooks: &[MutatingWebhook], secret: &Secret) {
    let ca = data(secret, "ca.crt");
    for hook in hooks {
        let bundle = hook.client_config.ca_bundle.as_ref().map(|b| b.0.clone());
        assert_eq!(
            bundle.as_deref(),
            Some(ca.as_bytes()),
            "caBundle of {}",
            hook.name
        );
    }
}

/// A client that trusts only the caBundle accepts it under every DNS name of the Service, the one
/// the apiserver dials included, and refuses any other name.
async fn it_serves_the_secrets_certificate_under_every_name_of_the_service(
    webhook: &str,
    secret: &Secret,
    service: &str,
) {
    let ca = data(secret, "ca.crt");
    let leaf = CertificateDer::pem_slice_iter(data(secret, "tls.crt").as_bytes())
        .next()
        .expect("a certificate in tls.crt")
        .expect("a PEM certificate");
    for name in [
        service.to_owned(),
        format!("{service}.{NAMESPACE}"),
        format!("{service}.{NAMESPACE}.svc"),
        format!("{service}.{NAMESPACE}.svc.cluster.local"),
    ] {
        let peer = handshake(webhook, &ca, &name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(peer, leaf, "{name}: the served certificate is the Secret's");
    }
    let wrong = handshake(webhook, &ca, "ocifit-webhook.elsewhere.svc").await;
    assert!(wrong.is_err(), "a name the certificate lacks is refused");
}

#[tokio::test]
async fn a_labelled_pod_gets_its_image_through_the_charts_webhook_configuration_and_service() {
    let cluster = Cluster::builder()
        .apiserver_arg("--enable-aggregator-routing=true")
        .with_registry(Registry::builder())
        .start()
        .await
        .expect("a local cluster and registry");
    let client = cluster.client().expect("a client");
    let env = Env {
        cluster,
        client,
        ocifit: crate::support::ocifit_binary().into(),
    };
    // The chart's own values for the local plain-HTTP registry, on loopback.
    let plain_http = format!("registry.plainHttp={{{}}}", env.registry().addr());
    let private = format!("registry.allowedPrivate={{{}}}", env.registry().addr());
    install(&env.cluster, &[&plain_http, &private]).await;

    // The chart's Service, backed by this host: the apiserver dials the endpoint's address under
    // the Service's DNS name.
    // Not loopback, which EndpointSlice validation refuses.
    let host = host_ipv4().expect("this host's address");
    let webhook = std::net::TcpListener::bind((host, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port on the host's address");
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "ocifit-webhook-host",
            "labels": {"kubernetes.io/service-name": "ocifit-webhook"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [host.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "webhook", "port": webhook.port(), "protocol": "TCP"}],
    }))
    .expect("an EndpointSlice");
    Api::<EndpointSlice>::namespaced(env.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &slice)
        .await
        .expect("the Service's EndpointSlice");

    let admin = free_address();
    let pod = ChartPod::stored(&env.client)
        .await
        .with_bind_addresses(&admin, &webhook.to_string());
    let kubeconfig = service_account_kubeconfig(&env.cluster, NAMESPACE, &pod.account).await;
    let replica = Replica::start(
        Path::new(crate::support::ocifit_binary()),
        &pod,
        &kubeconfig,
        &admin,
        env.cluster.dir().join("ocifit-chart-webhook.log"),
    )
    .await;

    let [debian, ubuntu, rocky] = env.push_flavors().await;
    for flavor in ["vanilla", "chocolate"] {
        env.add_node(linux_node(&format!("{flavor}-1")).label(FLAVOR, flavor))
            .await;
    }
    env.create_policy(&env.flavor_policy("flavors")).await;
    let status = env.wait_ready("flavors").await;
    assert_eq!(images(&status), [Some(debian.clone()), Some(ubuntu)]);
    assert!(!images(&status).contains(&Some(rocky)));

    create_namespace(&env.client, "apps")
        .await
        .expect("a namespace");
    let probe = TestPod::named("probe")
        .opted_in()
        .node_selector(FLAVOR, "vanilla")
        .build();
    let admitted = wait_until_admitted(&env.client, "apps", &probe, Duration::from_secs(30), |p| {
        p.spec
            .as_ref()
            .and_then(|s| s.containers[0].image.as_deref())
            != Some(PLACEHOLDER)
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "the apiserver reached the webhook through the chart's Service: {e}; log:\n{}",
            replica.log_text()
        )
    });
    let image = admitted.spec.and_then(|s| s.containers[0].image.clone());
    assert_eq!(image.as_deref(), Some(debian.as_str()));

    let log = replica.log_text().to_lowercase();
    assert!(!log.contains("forbidden"), "{log}");
    replica.stop().await;
}
