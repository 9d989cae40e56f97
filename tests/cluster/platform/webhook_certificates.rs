//! Managed webhook certificates on the real apiserver: the leader creates the Secret and patches the
//! caBundle of every webhook in the configuration; the apiserver then calls the webhook over TLS
//! and trusts it; another replica does not overwrite the Secret; a serving certificate near its
//! end is renewed on time from the same CA; a CA near its end is rotated in two steps, old and new
//! served certificates trusted throughout; a caBundle reset by someone else is restored as soon as
//! the configuration changes; a Secret replaced with a new CA is not served before every caBundle
//! carries that CA; a missing configuration is waited for; and it all runs under
//! exactly the RBAC of `config/rbac/`. The certificate is served by a TLS resolver fed through the
//! same `CertificateSink` the webhook's is.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use ocifit::admission::{
    CertificateAction, CertificateSettings, CertificateSink, StoredCertificates, plan_certificates,
    service_dns_names,
};
use ocifit_testkit::{
    Cluster, PodWebhook, SharedCluster, create_namespace, register_pod_webhook, wait_until_admitted,
};

use crate::support::apply_config_rbac;
use crate::support::certificates::*;
use crate::support::objects::TestPod;

static CLUSTER: SharedCluster = SharedCluster::new(Cluster::builder);

#[tokio::test]
async fn first_start_creates_the_secret_patches_every_ca_bundle_and_serves_a_verifiable_certificate()
 {
    let (client, settings) = started("certs-first").await;

    let replica = Replica::start(client.clone(), settings.clone());
    let (secret, ca) = settled(&client, &settings).await;
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let stored = stored(&secret);
    let plan = plan_certificates(
        &stored,
        &service_dns_names("ocifit-webhook", "certs-first"),
        jiff::Timestamp::now(),
    );
    assert!(
        matches!(plan.action(), CertificateAction::Keep { .. }),
        "the Secret holds a current CA and a serving certificate for the Service: {:?}",
        plan.action()
    );

    let tls = data(&secret, "tls.crt");
    serving(&replica, "the serving certificate loaded", &tls).await;
    handshake(
        replica.served.clone(),
        &ca,
        "ocifit-webhook.certs-first.svc",
    )
    .await
    .expect("the served certificate verifies with the patched caBundle");
    let wrong_name = handshake(replica.served.clone(), &ca, "elsewhere.example").await;
    assert!(wrong_name.is_err(), "a name the certificate lacks fails");
}

#[tokio::test]
async fn the_apiserver_trusts_the_managed_certificate_when_it_calls_the_webhook() {
    let cluster = CLUSTER.get().await.expect("the cluster");
    let client = cluster.client().expect("a client");
    let namespace = "certs-admission";
    // The apiserver reaches the webhook by URL on the host, so the "Service" is `localhost`:
    // the certificate then names what the apiserver dials.
    let mut settings = setup(&client, namespace).await;
    settings.service = "localhost".to_owned();
    let replica = Replica::start(client.clone(), settings.clone());
    let url = serve_admission(replica.served.clone()).await;
    let webhook = PodWebhook::new(&settings.configuration, &url, "")
        .match_label("certs-test", "true")
        .in_namespace(namespace);
    register_pod_webhook(&client, &webhook)
        .await
        .expect("the webhook configuration");
    settled(&client, &settings).await;

    let probe = TestPod::named("probe")
        .label("certs-test", "true")
        .image("app:latest")
        .build();
    wait_until_admitted(&client, namespace, &probe, WAIT, |pod| {
        pod.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("certs-test/admitted"))
    })
    .await
    .expect("the apiserver called the webhook over TLS it trusts");
}

#[tokio::test]
async fn a_second_replica_leaves_the_secret_as_it_is() {
    let (client, settings) = started("certs-replicas").await;

    // Two replicas that both believe they lead, starting at once: one create wins, the other
    // re-reads.
    let first = Replica::start(client.clone(), settings.clone());
    let second = Replica::start(client.clone(), settings.clone());
    let (secret, _) = settled(&client, &settings).await;
    let tls = data(&secret, "tls.crt");
    for replica in [&first, &second] {
        serving(
            replica,
            "both replicas serving the Secret's certificate",
            &tls,
        )
        .await;
    }
    let third = Replica::start(client.clone(), settings.clone());
    serving(&third, "a late replica serving the same certificate", &tls).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let after = get_secret(&client, &settings.namespace, &settings.secret)
        .await
        .expect("the Secret");
    assert_eq!(
        after.metadata.resource_version, secret.metadata.resource_version,
        "nobody rewrote the Secret"
    );
    assert_eq!(
        event_reasons(&client, &settings).await,
        ["CertificatesCreated"],
        "one replica wrote"
    );
    for replica in [&first, &second, &third] {
        assert_eq!(
            replica.served.loaded(),
            std::slice::from_ref(&tls),
            "one certificate, loaded once"
        );
    }
}

#[tokio::test]
async fn only_the_leader_writes_and_every_replica_serves_what_it_wrote() {
    let (client, settings) = started("certs-followers").await;

    let follower = Replica::start_following(client.clone(), settings.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        get_secret(&client, &settings.namespace, &settings.secret)
            .await
            .is_none(),
        "a follower creates nothing"
    );
    assert_eq!(
        bundles(&client, &settings.configuration).await,
        [None, None],
        "nor patches anything"
    );

    let leader = Replica::start(client.clone(), settings.clone());
    let (secret, _) = settled(&client, &settings).await;
    let tls = data(&secret, "tls.crt");
    for replica in [&leader, &follower] {
        serving(replica, "the leader's certificate served", &tls).await;
    }

    // Leadership moves: the new leader finds everything current and writes nothing.
    leader.lead(false);
    follower.lead(true);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = get_secret(&client, &settings.namespace, &settings.secret)
        .await
        .expect("the Secret");
    assert_eq!(
        after.metadata.resource_version,
        secret.metadata.resource_version
    );
    assert_eq!(
        event_reasons(&client, &settings).await,
        ["CertificatesCreated"]
    );
}

#[tokio::test]
async fn an_expiring_serving_certificate_is_renewed_on_time_from_the_same_ca() {
    let (client, settings) = started("certs-expiring").await;

    // A CA and a serving certificate valid for 9 more seconds of a 10-second life: due for
    // renewal in about 6 seconds.
    let now = jiff::Timestamp::now();
    let names = service_dns_names("ocifit-webhook", "certs-expiring");
    let material = plan_certificates(&StoredCertificates::default(), &names, now)
        .carry_out(now)
        .expect("a CA and certificate")
        .expect("new material");
    let (short_crt, short_key) = issue(
        &material.ca_crt,
        &material.ca_key,
        &names,
        time::Duration::seconds(1),
        time::Duration::seconds(9),
    );
    create_secret(
        &client,
        &settings,
        [&material.ca_crt, &material.ca_key, &short_crt, &short_key],
    )
    .await;

    let started = Instant::now();
    let replica = Replica::start(client.clone(), settings.clone());
    serving(&replica, "the short-lived certificate served", &short_crt).await;
    let renewed = eventually("a renewed serving certificate", async || {
        let found = get_secret(&client, &settings.namespace, &settings.secret).await?;
        let tls = self::data(&found, "tls.crt");
        (tls != short_crt).then_some(found)
    })
    .await;
    let waited = started.elapsed();
    assert!(
        waited > Duration::from_secs(3),
        "renewed when due, not at once ({waited:?})"
    );
    assert_eq!(self::data(&renewed, "ca.crt"), material.ca_crt, "same CA");
    assert_eq!(self::data(&renewed, "ca.key"), material.ca_key);
    let (_, ca) = settled(&client, &settings).await;
    let tls = self::data(&renewed, "tls.crt");
    serving(&replica, "the renewed certificate served", &tls).await;
    handshake(
        replica.served.clone(),
        &ca,
        "ocifit-webhook.certs-expiring.svc.cluster.local",
    )
    .await
    .expect("the renewed certificate verifies with the caBundle");
}

#[tokio::test]
async fn a_ca_near_its_end_is_rotated_in_two_steps_so_every_served_certificate_is_trusted() {
    let (client, mut settings) = started("certs-rotation").await;
    settings.rollover_delay = Duration::from_secs(3);

    // A CA with 30 days left (less than a year: due for rotation) and a current serving
    // certificate from it.
    let names = service_dns_names("ocifit-webhook", "certs-rotation");
    let [old_ca, old_key, old_crt, old_tls_key] = ca_near_its_end(&names);
    create_secret(
        &client,
        &settings,
        [&old_ca, &old_key, &old_crt, &old_tls_key],
    )
    .await;

    let replica = Replica::start(client.clone(), settings.clone());
    // First step: the new CA joins the bundle; the old serving certificate stays.
    let first = eventually("the new CA in the bundle", async || {
        let found = get_secret(&client, &settings.namespace, &settings.secret).await?;
        (data(&found, "ca.crt") != old_ca).then_some(found)
    })
    .await;
    let bundle = data(&first, "ca.crt");
    assert!(bundle.ends_with(&old_ca), "the old CA stays trusted");
    assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 2);
    assert_eq!(
        data(&first, "tls.crt"),
        old_crt,
        "the old certificate serves on"
    );
    // Second step, after the caBundle carries both: a certificate from the new CA.
    let second = eventually("a serving certificate from the new CA", async || {
        let found = get_secret(&client, &settings.namespace, &settings.secret).await?;
        (data(&found, "tls.crt") != old_crt).then_some(found)
    })
    .await;
    assert_eq!(data(&second, "ca.crt"), bundle);
    let (_, ca_bundle) = settled(&client, &settings).await;
    assert_eq!(ca_bundle, bundle);
    let new_crt = data(&second, "tls.crt");
    serving(&replica, "the new certificate served", &new_crt).await;
    handshake(
        replica.served.clone(),
        &ca_bundle,
        "ocifit-webhook.certs-rotation.svc",
    )
    .await
    .expect("the new CA's certificate verifies with the caBundle");
    let old_replica = Arc::new(Served::default());
    old_replica
        .load(old_crt.as_bytes(), old_tls_key.as_bytes())
        .expect("the old certificate");
    handshake(old_replica, &ca_bundle, "ocifit-webhook.certs-rotation.svc")
        .await
        .expect("the old CA's certificate still verifies with the caBundle");
    assert_eq!(
        event_reasons(&client, &settings).await,
        ["CARotated", "ServingCertificateIssued"]
    );
}

#[tokio::test]
async fn a_ca_bundle_reset_by_someone_else_is_restored() {
    let (client, settings) = started("certs-reset").await;
    let _replica = Replica::start(client.clone(), settings.clone());
    let (_, ca) = settled(&client, &settings).await;

    reset_ca_bundle(&client, &settings.configuration).await;
    let start = Instant::now();
    ca_bundle_restored(&client, &settings.configuration, &ca).await;
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "restored on the change, not on the hourly check"
    );
}

/// A deleted Secret is recreated by the leader with a new CA; until the caBundle carries it, no
/// replica may serve a certificate the apiserver cannot verify. Here the new Secret is written
/// by the test (no leader runs, so the caBundle stays the old one until the test sets it).
#[tokio::test]
async fn a_secret_with_a_new_ca_is_served_only_once_the_ca_bundle_carries_it() {
    let (client, settings) = started("certs-new-ca").await;
    let replica = Replica::start(client.clone(), settings.clone());
    let (old, _) = settled(&client, &settings).await;
    let old_tls = data(&old, "tls.crt");
    serving(&replica, "the first certificate served", &old_tls).await;
    replica.lead(false);

    let secrets = Api::<Secret>::namespaced(client.clone(), &settings.namespace);
    secrets
        .delete(&settings.secret, &Default::default())
        .await
        .expect("the Secret deleted");
    let ca = ocifit_testkit::pki::CertificateAuthority::new("a new CA").expect("a CA");
    let issued = ca
        .issue_server("ocifit-webhook", &["ocifit-webhook.certs-new-ca.svc"])
        .expect("a certificate");
    let replacement: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": settings.secret},
        "type": "kubernetes.io/tls",
        "stringData": {"ca.crt": ca.cert_pem(), "tls.crt": issued.cert_pem, "tls.key": issued.key_pem}
    }))
    .expect("a Secret");
    secrets
        .create(&PostParams::default(), &replacement)
        .await
        .expect("the new Secret");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        replica.served.loaded().last(),
        Some(&old_tls),
        "the new CA's certificate was served before the caBundle carried the CA"
    );

    let bundle = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca.cert_pem());
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            &settings.configuration,
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"webhooks": [
                {"name": "pods.ocifit.io", "clientConfig": {"caBundle": bundle}},
                {"name": "other.ocifit.io", "clientConfig": {"caBundle": bundle}}
            ]})),
        )
        .await
        .expect("the caBundle set");
    eventually("the new certificate served", async || {
        (replica.served.loaded().last() == Some(&issued.cert_pem)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_missing_configuration_is_waited_for_without_giving_up() {
    let cluster = CLUSTER.get().await.expect("the cluster");
    let client = cluster.client().expect("a client");
    let settings = setup(&client, "certs-late").await;
    let _replica = Replica::start(client.clone(), settings.clone());
    eventually("the Secret", async || {
        get_secret(&client, &settings.namespace, &settings.secret).await
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    create_configuration(&client, &settings.configuration).await;
    settled(&client, &settings).await;
}

#[tokio::test]
async fn it_runs_under_the_role_in_config_rbac_and_nothing_more() {
    let cluster = CLUSTER.get().await.expect("the cluster");
    let admin = cluster.client().expect("a client");
    // The names config/rbac grants: the chart's defaults.
    create_namespace(&admin, "ocifit-system")
        .await
        .expect("the namespace");
    let mut settings = CertificateSettings::new(
        "ocifit-system",
        "ocifit-webhook-tls",
        "ocifit-webhook",
        "ocifit",
    );
    settings.retry = Duration::from_millis(200);
    settings.bundle_check = Duration::from_secs(3600);
    apply_config_rbac(&cluster).await;
    create_configuration(&admin, "ocifit").await;
    let operator = service_account_client(&cluster).await;

    let replica = under_the_role_it_creates_publishes_and_restores_the_ca_bundle(
        &admin, &operator, &settings,
    )
    .await;
    the_role_grants_no_other_secret_or_configuration(&admin, &operator).await;
    drop(replica);
    a_ca_rotation_whose_bundle_cannot_be_set_stops_after_its_first_step(
        &admin, operator, &settings,
    )
    .await;
}

/// It creates the Secret, publishes its Events, and its watch on the configuration is allowed
/// too: a reset is restored at once. Returns the replica, still running.
async fn under_the_role_it_creates_publishes_and_restores_the_ca_bundle(
    admin: &kube::Client,
    operator: &kube::Client,
    settings: &CertificateSettings,
) -> Replica {
    let replica = Replica::start(operator.clone(), settings.clone());
    let (secret, ca) = settled(admin, settings).await;
    assert_eq!(
        event_reasons(admin, settings).await,
        ["CertificatesCreated"],
        "Events are published under the role"
    );
    let tls = data(&secret, "tls.crt");
    serving(&replica, "the serving certificate loaded", &tls).await;
    // The watch on the configuration is allowed too: a reset is restored at once.
    reset_ca_bundle(admin, "ocifit").await;
    ca_bundle_restored(admin, "ocifit", &ca).await;
    replica
}

/// No other Secret read or written, no other webhook configuration touched.
async fn the_role_grants_no_other_secret_or_configuration(
    admin: &kube::Client,
    operator: &kube::Client,
) {
    let secrets = Api::<Secret>::namespaced(operator.clone(), "ocifit-system");
    let other = Secret {
        metadata: ObjectMeta {
            name: Some("someone-elses".to_owned()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    Api::<Secret>::namespaced(admin.clone(), "ocifit-system")
        .create(&PostParams::default(), &other)
        .await
        .expect("the other Secret");
    let update = secrets
        .replace("someone-elses", &PostParams::default(), &other)
        .await;
    assert!(forbidden(&update), "{update:?}");
    // Elsewhere it may create a Secret (each artifact cache's generated credentials), never read
    // or change one it did not create.
    Api::<Secret>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &other)
        .await
        .expect("a Secret in another namespace");
    let elsewhere = Api::<Secret>::namespaced(operator.clone(), "default");
    let read = elsewhere.get("someone-elses").await;
    assert!(forbidden(&read), "{read:?}");
    let update = elsewhere
        .replace("someone-elses", &PostParams::default(), &other)
        .await;
    assert!(forbidden(&update), "{update:?}");
    create_configuration(admin, "not-ocifit").await;
    let patch = Api::<MutatingWebhookConfiguration>::all(operator.clone())
        .patch(
            "not-ocifit",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await;
    assert!(forbidden(&patch), "{patch:?}");
}

/// The new caBundle cannot be set (a configuration the role does not cover): nothing serves a
/// certificate the apiserver does not trust.
async fn a_ca_rotation_whose_bundle_cannot_be_set_stops_after_its_first_step(
    admin: &kube::Client,
    operator: kube::Client,
    settings: &CertificateSettings,
) {
    let names = service_dns_names("ocifit-webhook", "ocifit-system");
    let [old_ca, old_key, old_crt, old_tls_key] = ca_near_its_end(&names);
    let admin_secrets = Api::<Secret>::namespaced(admin.clone(), "ocifit-system");
    let mut current = admin_secrets
        .get("ocifit-webhook-tls")
        .await
        .expect("the Secret");
    current.data = Some(
        [
            ("ca.crt", &old_ca),
            ("ca.key", &old_key),
            ("tls.crt", &old_crt),
            ("tls.key", &old_tls_key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), k8s_openapi::ByteString(v.as_bytes().to_vec())))
        .collect(),
    );
    admin_secrets
        .replace("ocifit-webhook-tls", &PostParams::default(), &current)
        .await
        .expect("a Secret with a CA near its end");
    let mut blocked = settings.clone();
    blocked.configuration = "not-ocifit".to_owned();
    blocked.rollover_delay = Duration::from_millis(300);
    let _rotating = Replica::start(operator, blocked);
    eventually("the first step of the rotation", async || {
        let found = get_secret(admin, "ocifit-system", "ocifit-webhook-tls").await?;
        (data(&found, "ca.crt") != old_ca).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let found = get_secret(admin, "ocifit-system", "ocifit-webhook-tls")
        .await
        .expect("the Secret");
    assert_eq!(
        data(&found, "tls.crt"),
        old_crt,
        "the old CA's certificate serves on until the new CA is trusted"
    );
}

/// The shared cluster's client and the settings of a replica in `namespace`, with its webhook
/// configuration created.
async fn started(namespace: &str) -> (kube::Client, CertificateSettings) {
    let cluster = CLUSTER.get().await.expect("the cluster");
    let client = cluster.client().expect("a client");
    let settings = setup(&client, namespace).await;
    create_configuration(&client, &settings.configuration).await;
    (client, settings)
}

/// Waits until `replica` serves `certificate`.
async fn serving(replica: &Replica, what: &str, certificate: &str) {
    eventually(what, async || {
        let loaded = replica.served.loaded();
        loaded.iter().any(|c| c == certificate).then_some(())
    })
    .await;
}

/// As `helm upgrade` would: the chart's configuration without a caBundle.
async fn reset_ca_bundle(client: &kube::Client, configuration: &str) {
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            configuration,
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({
                "webhooks": [{"name": "pods.ocifit.io", "clientConfig": {"caBundle": null}}]
            })),
        )
        .await
        .expect("the patch");
}

/// Waits until every webhook of the configuration carries `ca` again.
async fn ca_bundle_restored(client: &kube::Client, configuration: &str, ca: &str) {
    eventually("the caBundle restored", async || {
        let found = bundles(client, configuration).await;
        found.iter().all(|b| b.as_deref() == Some(ca)).then_some(())
    })
    .await;
}

/// A CA with 30 days left (less than a year: due for rotation) and a current serving certificate
/// from it: CA certificate, CA key, certificate, key.
fn ca_near_its_end(names: &[String]) -> [String; 4] {
    let (ca, ca_key) = ca_ending_in(time::Duration::days(30));
    let (crt, key) = issue(
        &ca,
        &ca_key,
        names,
        time::Duration::days(1),
        time::Duration::days(20),
    );
    [ca, ca_key, crt, key]
}
