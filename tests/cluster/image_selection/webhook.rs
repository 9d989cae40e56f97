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

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::ImageSelectionPolicyStatus;
use ocifit::api::OnUnpinned;
use ocifit::api::pod::{
    DECISION_ARTIFACT_DIGEST, DECISION_CLASSES, DECISION_IMAGES, DECISION_POLICY, POLICY,
};
use ocifit_testkit::annotation;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::support::access::handshake;
use crate::support::objects::{OptIn, PLACEHOLDER, TestPod};
use crate::support::webhook::{Serving, WebhookCertificate, admissions, image};
use crate::support::{Controller, Env, FLAVOR, free_address, get};

const NAMESPACE: &str = "webhook-e2e";
/// The placeholder of the `onUnpinned: Deny` policy (one placeholder per policy, or pods that
/// name none are ambiguous).
const DENY_PLACEHOLDER: &str = "placeholder:deny";
const WAIT: Duration = Duration::from_secs(30);

/// A pod labelled `app=<name>`.
fn pod(name: &str) -> TestPod {
    TestPod::named(name).label("app", name)
}

/// What the scenario set up: the flavor images, the two policies' statuses, the webhook.
struct Setup {
    by_flavor: BTreeMap<&'static str, String>,
    statuses: BTreeMap<&'static str, ImageSelectionPolicyStatus>,
    certificate: WebhookCertificate,
    webhook_address: String,
    probe: Pod,
}

impl Setup {
    fn image_of(&self, flavor: &str) -> &str {
        &self.by_flavor[flavor]
    }

    /// The name of the class of `flavor` in the status of `policy`.
    fn class_of(&self, policy: &str, flavor: &str) -> String {
        self.statuses[policy]
            .classes
            .iter()
            .find(|c| c.labels.get(FLAVOR).map(String::as_str) == Some(flavor))
            .map(|c| c.name.clone())
            .expect("a class per flavor")
    }
}

#[tokio::test]
async fn opted_in_pods_get_the_image_of_their_class_with_the_registry_frozen() {
    let env = Env::start_scheduling(crate::support::ocifit_binary()).await;
    let Serving {
        by_flavor,
        certificate,
        address: webhook_address,
        controller,
    } = env.serve_flavors(NAMESPACE, "webhook-e2e", &[]).await;

    env.create_policy(&env.flavor_policy("flavors")).await;
    env.create_policy(
        &env.flavor_policy("flavors-deny")
            .on_unpinned(OnUnpinned::Deny)
            .target_image(DENY_PLACEHOLDER),
    )
    .await;
    let mut statuses = BTreeMap::new();
    for name in ["flavors", "flavors-deny"] {
        statuses.insert(name, env.wait_ready(name).await);
    }

    let probe = certificate
        .activate_mutate(
            &env,
            "ocifit-e2e",
            &webhook_address,
            NAMESPACE,
            &by_flavor["vanilla"],
        )
        .await;
    let setup = Setup {
        by_flavor,
        statuses,
        certificate,
        webhook_address,
        probe,
    };

    // From here on the registry answers nothing: admission must not need it.
    let requests = controller.metric("ocifit_registry_requests_total").await;
    env.registry().pause().expect("the registry frozen");
    let answered = tokio::time::timeout(
        Duration::from_millis(500),
        get(env.registry().addr(), "/v2/"),
    )
    .await;
    assert!(
        !matches!(answered, Ok(Some(_))),
        "the frozen registry still answers"
    );
    a_labelled_pod_gets_its_flavors_image_and_the_decision_annotations(&env, &setup).await;
    an_unlabelled_pod_is_stored_as_written_and_never_reaches_the_webhook(&env, &controller).await;
    an_unpinned_pod_is_pinned_and_bound_to_a_node_of_the_chosen_class(&env, &setup).await;
    under_deny_a_pod_spanning_two_classes_is_refused_naming_them(&env, &setup).await;
    assert_eq!(
        controller.metric("ocifit_registry_requests_total").await,
        requests,
        "the webhook path reached the registry"
    );
    env.registry().resume().expect("the registry thawed");

    a_certificate_rotated_on_disk_fails_no_admission_and_is_served(&env, &setup).await;
    a_replica_without_its_certificate_never_turns_ready(&env).await;
    assert!(controller.stop().await.success());
}

async fn a_labelled_pod_gets_its_flavors_image_and_the_decision_annotations(
    env: &Env,
    setup: &Setup,
) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let ubuntu = setup.image_of("chocolate");
    let started = Instant::now();
    let stored = pods
        .create(
            &PostParams::default(),
            &pod("chocolate")
                .opted_in()
                .node_selector(FLAVOR, "chocolate")
                .build(),
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
    assert_eq!(images.get("app").map(String::as_str), Some(ubuntu));
    assert_eq!(
        annotation(&stored, DECISION_CLASSES),
        Some(setup.class_of("flavors", "chocolate").as_str())
    );
    let digest = setup.statuses["flavors"]
        .artifact
        .as_ref()
        .map(|a| a.digest.clone());
    assert_eq!(
        annotation(&stored, DECISION_ARTIFACT_DIGEST).map(str::to_owned),
        digest
    );
}

async fn an_unlabelled_pod_is_stored_as_written_and_never_reaches_the_webhook(
    env: &Env,
    controller: &Controller,
) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let before = admissions(controller).await;
    let plain = pods
        .create(&PostParams::default(), &pod("plain").build())
        .await
        .expect("the unlabelled pod");
    assert_eq!(image(&plain), PLACEHOLDER);
    assert!(annotation(&plain, DECISION_POLICY).is_none());
    assert_eq!(admissions(controller).await, before);
}

async fn an_unpinned_pod_is_pinned_and_bound_to_a_node_of_the_chosen_class(
    env: &Env,
    setup: &Setup,
) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let pinned = pods
        .create(&PostParams::default(), &pod("unpinned").opted_in().build())
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
        setup.by_flavor.get(flavor),
        Some(&chosen),
        "bound to {bound}, whose image is not the pod's"
    );
}

/// And an Event on the policy names the pod.
async fn under_deny_a_pod_spanning_two_classes_is_refused_naming_them(env: &Env, setup: &Setup) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let spanning = pod("spanning")
        .opted_in()
        .label(POLICY, "flavors-deny")
        .image(DENY_PLACEHOLDER)
        .requires_node_in(FLAVOR, &["vanilla", "chocolate"])
        .build();
    let refused = pods
        .create(&PostParams::default(), &spanning)
        .await
        .expect_err("the spanning pod denied")
        .to_string();
    for flavor in ["vanilla", "chocolate"] {
        let class = setup.class_of("flavors-deny", flavor);
        assert!(refused.contains(&class), "{class} not named in: {refused}");
    }
    let events = env.wait_event("flavors-deny", "Warning", "Unpinned").await;
    assert!(
        events
            .iter()
            .any(|(_, _, note)| note.contains(&format!("{NAMESPACE}/spanning"))),
        "{events:?}"
    );
}

/// Written aside and renamed over while the apiserver keeps admitting: no admission fails, and
/// new handshakes get the new certificate.
async fn a_certificate_rotated_on_disk_fails_no_admission_and_is_served(env: &Env, setup: &Setup) {
    let WebhookCertificate { ca, cert, key } = &setup.certificate;
    let rotated = ca
        .issue_server("ocifit-webhook-rotated", &["127.0.0.1"])
        .expect("a second serving certificate");
    let admitting = {
        let (client, probe) = (env.client.clone(), setup.probe.clone());
        let debian = setup.image_of("vanilla").to_owned();
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
    for (file, pem) in [(key, &rotated.key_pem), (cert, &rotated.cert_pem)] {
        let staged = file.with_extension("new");
        std::fs::write(&staged, pem).expect("a staged file");
        std::fs::rename(&staged, file).expect("the file replaced");
    }
    let admitted = admitting.await.expect("the admitting task");
    eprintln!("MEASURE dry-run admissions across the rotation: {admitted} in 3s");
    let rotated_der = CertificateDer::from_pem_slice(rotated.cert_pem.as_bytes()).expect("DER");
    let start = Instant::now();
    while handshake(&setup.webhook_address, ca.cert_pem(), "127.0.0.1")
        .await
        .expect("a handshake")
        != rotated_der
    {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the rotated certificate is not served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Managed mode as a follower: the leader, which does not manage certificates, never writes the
/// Secret. It serves /livez but never turns ready, so no Service sends it an admission.
async fn a_replica_without_its_certificate_never_turns_ready(env: &Env) {
    let webhook_address = free_address();
    let unready = Controller::spawn(
        env,
        "webhook-e2e-managed",
        &[
            "--webhook-bind-address",
            &webhook_address,
            "--manage-webhook-certificate",
        ],
    );
    let start = Instant::now();
    while get(&unready.admin, "/livez").await.is_none() {
        assert!(
            start.elapsed() < WAIT,
            "the managed replica never served /livez"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(3) {
        let ready = get(&unready.admin, "/readyz").await;
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
