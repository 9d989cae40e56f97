//! The webhook end to end on the real control plane (apiserver, kube-scheduler, kwok) and a real
//! registry: `ocifit run` (the built binary) serves the controller and the webhook on 127.0.0.1
//! with a certificate from the test CA; a MutatingWebhookConfiguration selects opted-in pods.
//! Once the policies resolved the registry is frozen, and every admission still succeeds
//! without a single registry request: labelled pods get the image of their class, unlabelled
//! ones never reach the webhook, an unpinned pod is pinned and bound by kube-scheduler to a node
//! of the chosen class, and under `onUnpinned: Deny` a pod spanning two classes is refused with
//! the classes named and an Event on the policy. The certificate rotates on disk while the
//! apiserver keeps admitting, with no failed admission. A replica without a certificate never
//! turns ready.

mod controller_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use controller_support::{Controller, Env, FLAVOR, free_address, is};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::pod::{
    DECISION_ARTIFACT_DIGEST, DECISION_CLASSES, DECISION_IMAGES, DECISION_POLICY, ENABLED_LABEL,
    POLICY,
};
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{Cluster, PodWebhook, register_pod_webhook, wait_until_admitted};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;

const NAMESPACE: &str = "webhook-e2e";
const PLACEHOLDER: &str = "placeholder:latest";
/// The placeholder of the `onUnpinned: Deny` policy (one placeholder per policy, or pods that
/// name none are ambiguous).
const DENY_PLACEHOLDER: &str = "placeholder:deny";
const WAIT: Duration = Duration::from_secs(30);

fn pod(name: &str, labelled: bool, metadata: serde_json::Value, spec: serde_json::Value) -> Pod {
    let mut labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    if labelled {
        labels.insert(ENABLED_LABEL.to_owned(), "true".to_owned());
    }
    let mut value = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": PLACEHOLDER}]},
    });
    for (key, extra) in [("metadata", metadata), ("spec", spec)] {
        if let Some(extra) = extra.as_object() {
            for (k, v) in extra {
                match (value[key][k].as_object_mut(), v.as_object()) {
                    (Some(present), Some(more)) => present.extend(more.clone()),
                    _ => value[key][k] = v.clone(),
                }
            }
        }
    }
    serde_json::from_value(value).expect("a pod")
}

fn image(pod: &Pod) -> &str {
    pod.spec.as_ref().expect("a spec").containers[0]
        .image
        .as_deref()
        .unwrap_or_default()
}

fn annotation<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The sum of every `ocifit_admissions_total` series.
async fn admissions(controller: &Controller) -> f64 {
    let (_, body) = controller_support::get(&controller.admin, "/metrics")
        .await
        .expect("/metrics");
    body.lines()
        .filter(|l| l.starts_with("ocifit_admissions_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn opted_in_pods_get_the_image_of_their_class_with_the_registry_frozen() {
    let env = Env::start_with(Cluster::builder().with_all_controllers()).await;
    let [debian, ubuntu, rocky] = env.push_flavors("ocifit/flavor-compat:v1").await;
    let by_flavor = BTreeMap::from([
        ("vanilla", debian.clone()),
        ("chocolate", ubuntu.clone()),
        ("strawberry", rocky.clone()),
    ]);
    for flavor in by_flavor.keys() {
        env.node(&format!("{flavor}-1"), &[(FLAVOR, flavor)]).await;
    }
    ocifit_testkit::create_namespace(&env.client, NAMESPACE)
        .await
        .expect("the test namespace");

    let ca = CertificateAuthority::new("ocifit webhook CA").expect("a CA");
    let serving = ca
        .issue_server("ocifit-webhook", &["127.0.0.1"])
        .expect("a serving certificate");
    let (cert, key) = (
        env.cluster.dir().join("webhook.crt"),
        env.cluster.dir().join("webhook.key"),
    );
    std::fs::write(&cert, &serving.cert_pem).expect("the certificate file");
    std::fs::write(&key, &serving.key_pem).expect("the key file");
    let webhook_address = free_address();
    let controller = Controller::start(
        &env,
        "webhook-e2e",
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

    env.policy("flavors", "ocifit/flavor-compat:v1", json!({}))
        .await;
    env.policy(
        "flavors-deny",
        "ocifit/flavor-compat:v1",
        json!({"onUnpinned": "Deny", "targetImage": DENY_PLACEHOLDER}),
    )
    .await;
    let mut statuses = BTreeMap::new();
    for name in ["flavors", "flavors-deny"] {
        let (status, _) = env
            .wait_status(name, WAIT, "Ready", |s| is(s, "Ready", "True", "Resolved"))
            .await;
        statuses.insert(name, status);
    }
    let class_of = |policy: &str, flavor: &str| {
        statuses[policy]
            .classes
            .iter()
            .find(|c| c.labels.get(FLAVOR).map(String::as_str) == Some(flavor))
            .map(|c| c.name.clone())
            .expect("a class per flavor")
    };

    let webhook = PodWebhook::new(
        "ocifit-e2e",
        &format!("https://{webhook_address}/mutate"),
        ca.cert_pem(),
    )
    .match_label(ENABLED_LABEL, "true")
    .in_namespace(NAMESPACE);
    register_pod_webhook(&env.client, &webhook)
        .await
        .expect("the webhook configuration");
    let probe = pod(
        "probe",
        true,
        json!({}),
        json!({"nodeSelector": {FLAVOR: "vanilla"}}),
    );
    wait_until_admitted(&env.client, NAMESPACE, &probe, WAIT, |p| image(p) == debian)
        .await
        .expect("the webhook active");

    // From here on the registry answers nothing: admission must not need it.
    let requests = controller.metric("ocifit_registry_requests_total").await;
    env.registry().pause().expect("the registry frozen");
    let answered = tokio::time::timeout(
        Duration::from_millis(500),
        controller_support::get(env.registry().addr(), "/v2/"),
    )
    .await;
    assert!(
        !matches!(answered, Ok(Some(_))),
        "the frozen registry still answers"
    );
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let create = PostParams::default();

    // A labelled pod on one flavor: that flavor's image and the decision annotations.
    let started = Instant::now();
    let stored = pods
        .create(
            &create,
            &pod(
                "chocolate",
                true,
                json!({}),
                json!({"nodeSelector": {FLAVOR: "chocolate"}}),
            ),
        )
        .await
        .expect("the chocolate pod admitted");
    eprintln!(
        "MEASURE pod create through the webhook: {:?}",
        started.elapsed()
    );
    assert_eq!(image(&stored), ubuntu);
    assert_eq!(annotation(&stored, DECISION_POLICY), Some("flavors"));
    let images: BTreeMap<String, String> =
        serde_json::from_str(annotation(&stored, DECISION_IMAGES).expect("images annotation"))
            .expect("a JSON map");
    assert_eq!(images.get("app"), Some(&ubuntu));
    assert_eq!(
        annotation(&stored, DECISION_CLASSES),
        Some(class_of("flavors", "chocolate").as_str())
    );
    let digest = statuses["flavors"]
        .artifact
        .as_ref()
        .map(|a| a.digest.clone());
    assert_eq!(
        annotation(&stored, DECISION_ARTIFACT_DIGEST).map(str::to_owned),
        digest
    );

    // An unlabelled pod is stored as written and never reached the webhook.
    let before = admissions(&controller).await;
    let plain = pods
        .create(&create, &pod("plain", false, json!({}), json!({})))
        .await
        .expect("the unlabelled pod");
    assert_eq!(image(&plain), PLACEHOLDER);
    assert!(annotation(&plain, DECISION_POLICY).is_none());
    assert_eq!(admissions(&controller).await, before);

    // An unpinned pod is pinned, and kube-scheduler binds it to a node of the chosen class.
    let pinned = pods
        .create(&create, &pod("unpinned", true, json!({}), json!({})))
        .await
        .expect("the unpinned pod admitted");
    let chosen = image(&pinned).to_owned();
    let affinity = pinned
        .spec
        .as_ref()
        .and_then(|s| s.affinity.clone())
        .expect("pinned by node affinity");
    assert!(
        affinity.node_affinity.is_some(),
        "{affinity:?} pins no node"
    );
    let bound = wait_bound(&pods, "unpinned").await;
    let flavor = bound.strip_suffix("-1").expect("a flavor node");
    assert_eq!(
        by_flavor.get(flavor),
        Some(&chosen),
        "bound to {bound}, whose image is not the pod's"
    );

    // Under onUnpinned: Deny a pod spanning two classes is refused, naming them.
    let spanning = pod(
        "spanning",
        true,
        json!({"labels": {POLICY: "flavors-deny"}}),
        json!({"containers": [{"name": "app", "image": DENY_PLACEHOLDER}],
               "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": FLAVOR, "operator": "In", "values": ["vanilla", "chocolate"]}]}]}}}}),
    );
    let refused = pods
        .create(&create, &spanning)
        .await
        .expect_err("the spanning pod denied")
        .to_string();
    for flavor in ["vanilla", "chocolate"] {
        let class = class_of("flavors-deny", flavor);
        assert!(refused.contains(&class), "{class} not named in: {refused}");
    }
    let events = env.wait_event("flavors-deny", "Warning", "Unpinned").await;
    assert!(
        events
            .iter()
            .any(|(_, _, note)| note.contains(&format!("{NAMESPACE}/spanning"))),
        "{events:?}"
    );

    assert_eq!(
        controller.metric("ocifit_registry_requests_total").await,
        requests,
        "the webhook path reached the registry"
    );
    env.registry().resume().expect("the registry thawed");

    // The serving certificate rotated on disk (written aside, renamed over) while the apiserver
    // keeps admitting: no admission fails, and new handshakes get the new certificate.
    let rotated = ca
        .issue_server("ocifit-webhook-rotated", &["127.0.0.1"])
        .expect("a second serving certificate");
    let admitting = {
        let (client, probe) = (env.client.clone(), probe.clone());
        tokio::spawn(async move {
            let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
            let dry_run = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            let mut admitted = 0;
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(3) {
                let pod = pods
                    .create(&dry_run, &probe)
                    .await
                    .expect("admitted while rotating");
                assert_eq!(image(&pod), debian);
                admitted += 1;
            }
            admitted
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (file, pem) in [(&key, &rotated.key_pem), (&cert, &rotated.cert_pem)] {
        let staged = file.with_extension("new");
        std::fs::write(&staged, pem).expect("a staged file");
        std::fs::rename(&staged, file).expect("the file replaced");
    }
    let admitted = admitting.await.expect("the admitting task");
    eprintln!("MEASURE dry-run admissions across the rotation: {admitted} in 3s");
    let rotated_der = CertificateDer::from_pem_slice(rotated.cert_pem.as_bytes()).expect("DER");
    let start = Instant::now();
    while served_leaf(&webhook_address, ca.cert_pem()).await != rotated_der {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the rotated certificate is not served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A replica whose certificate is not there yet (managed mode as a follower: the leader,
    // which does not manage certificates, never writes the Secret) serves /livez but never turns
    // ready, so no Service sends it an admission.
    let webhook_address = free_address();
    let unready = Controller::spawn(
        &env,
        "webhook-e2e-managed",
        &[
            "--webhook-bind-address",
            &webhook_address,
            "--manage-webhook-certificate",
        ],
    );
    let start = Instant::now();
    while controller_support::get(&unready.admin, "/livez")
        .await
        .is_none()
    {
        assert!(
            start.elapsed() < WAIT,
            "the managed replica never served /livez"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(3) {
        let ready = controller_support::get(&unready.admin, "/readyz").await;
        assert_eq!(
            ready.map(|(code, _)| code),
            Some(503),
            "ready without a certificate"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        unready.log_text().contains("caches synced"),
        "{}",
        unready.log_text()
    );
    assert!(unready.stop().await.success());
    assert!(controller.stop().await.success());
}

/// The leaf certificate the webhook presents to a new TLS handshake.
async fn served_leaf(address: &str, ca_pem: &str) -> CertificateDer<'static> {
    ocifit_testkit::pki::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("the CA"))
        .expect("a root");
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .expect("the webhook port");
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").expect("a name"), tcp)
        .await
        .expect("a handshake");
    tls.get_ref().1.peer_certificates().expect("a certificate")[0].clone()
}

/// The node the pod is bound to, once kube-scheduler bound it.
async fn wait_bound(pods: &Api<Pod>, name: &str) -> String {
    let start = Instant::now();
    loop {
        let pod = pods.get(name).await.expect("the pod");
        if let Some(node) = pod.spec.and_then(|s| s.node_name) {
            return node;
        }
        assert!(start.elapsed() < WAIT, "{name} not bound within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
