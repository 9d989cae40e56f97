//! Managed webhook certificates on the real apiserver: the leader creates the Secret and patches the
//! caBundle of every webhook in the configuration; the apiserver then calls the webhook over TLS
//! and trusts it; another replica does not overwrite the Secret; a serving certificate near its
//! end is renewed on time from the same CA; a CA near its end is rotated in two steps, old and new
//! served certificates trusted throughout; a caBundle reset by someone else is restored as soon as
//! the configuration changes; a missing configuration is waited for; and it all runs under
//! exactly the RBAC of `config/rbac/`. The certificate is served by a TLS resolver fed through the
//! same `CertificateSink` the webhook's is.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Secret, ServiceAccount};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::{Api, Client};
use ocifit::controller::leader::Leadership;
use ocifit::webhook::certificates::{self, CertificateSink, Settings, Stored};
use ocifit_testkit::{
    Cluster, PodWebhook, SharedCluster, create_namespace, register_pod_webhook, wait_until_admitted,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

static CLUSTER: SharedCluster = SharedCluster::new(Cluster::builder);

const WAIT: Duration = Duration::from_secs(20);

/// Stands for the webhook's TLS resolver: serves the last certificate loaded, and remembers
/// every one.
#[derive(Debug, Default)]
struct Served {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    loaded: Mutex<Vec<String>>,
}

impl CertificateSink for Served {
    fn load(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<(), String> {
        let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| e.to_string())?;
        let key =
            rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| e.to_string())?;
        *self.current.write().expect("the served lock") =
            Some(Arc::new(CertifiedKey::new(chain, key)));
        self.loaded
            .lock()
            .expect("the loaded lock")
            .push(String::from_utf8_lossy(cert_chain_pem).into_owned());
        Ok(())
    }
}

impl ResolvesServerCert for Served {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().expect("the served lock").clone()
    }
}

impl Served {
    fn loaded(&self) -> Vec<String> {
        self.loaded.lock().expect("the loaded lock").clone()
    }
}

/// One replica's certificate manager, running until dropped.
struct Replica {
    served: Arc<Served>,
    _stop: oneshot::Sender<()>,
}

impl Replica {
    fn start(client: Client, settings: Settings) -> Replica {
        let served = Arc::new(Served::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let (leadership, lease) = Leadership::always();
        let sink: Arc<dyn CertificateSink> = served.clone();
        tokio::spawn(async move {
            certificates::manage(client, settings, leadership, sink, async {
                let _ = stopped.await;
            })
            .await;
            drop(lease);
        });
        Replica {
            served,
            _stop: stop,
        }
    }
}

/// A namespace of its own and settings with this test's names, checked quickly.
async fn setup(client: &Client, namespace: &str) -> Settings {
    create_namespace(client, namespace)
        .await
        .expect("a namespace");
    let mut settings = Settings::new(namespace, "webhook-tls", "ocifit-webhook", namespace);
    settings.identity = format!("{namespace}-replica");
    settings.retry = Duration::from_millis(200);
    // Long enough that only the watches explain a prompt reaction.
    settings.bundle_check = Duration::from_secs(3600);
    settings
}

/// A configuration with two webhooks and no caBundle.
async fn create_configuration(client: &Client, name: &str) {
    let webhook = |webhook: &str| MutatingWebhook {
        name: webhook.to_owned(),
        client_config: WebhookClientConfig {
            url: Some("https://127.0.0.1:1/mutate".to_owned()),
            ..WebhookClientConfig::default()
        },
        admission_review_versions: vec!["v1".to_owned()],
        side_effects: "None".to_owned(),
        failure_policy: Some("Ignore".to_owned()),
        ..MutatingWebhook::default()
    };
    let configuration = MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![webhook("pods.ocifit.io"), webhook("other.ocifit.io")]),
    };
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &configuration)
        .await
        .expect("a webhook configuration");
}

async fn get_secret(client: &Client, namespace: &str, name: &str) -> Option<Secret> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .expect("the Secret read")
}

fn data(secret: &Secret, key: &str) -> String {
    let bytes = &secret.data.as_ref().expect("Secret data")[key].0;
    String::from_utf8(bytes.clone()).expect("UTF-8 PEM")
}

/// The caBundle of each webhook of the configuration.
async fn bundles(client: &Client, name: &str) -> Vec<Option<String>> {
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(name)
        .await
        .expect("the webhook configuration")
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| {
            w.client_config
                .ca_bundle
                .map(|b| String::from_utf8(b.0).expect("a UTF-8 caBundle"))
        })
        .collect()
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < WAIT, "{what} not seen within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Secret once it holds a serving certificate, and the caBundle once every webhook has
/// `ca.crt`.
async fn settled(client: &Client, settings: &Settings) -> (Secret, String) {
    let secret = eventually("the Secret", async || {
        get_secret(client, &settings.namespace, &settings.secret)
            .await
            .filter(|s| s.data.as_ref().is_some_and(|d| d.contains_key("tls.crt")))
    })
    .await;
    let ca = data(&secret, "ca.crt");
    eventually("the caBundle", async || {
        let found = bundles(client, &settings.configuration).await;
        found
            .iter()
            .all(|b| b.as_deref() == Some(&ca))
            .then_some(())
    })
    .await;
    (secret, ca)
}

/// Completes a TLS handshake with `served` as a client that trusts only `ca_bundle` and expects
/// the Service's name `host`; the error the client saw otherwise.
async fn handshake(served: Arc<Served>, ca_bundle: &str, host: &str) -> Result<(), String> {
    ocifit_testkit::pki::install_crypto_provider();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("its address");
    let server = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(served);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let accept = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("a connection");
        acceptor.accept(stream).await.map(|_| ())
    });
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_bundle.as_bytes()) {
        roots
            .add(cert.expect("a PEM certificate"))
            .expect("a trusted CA");
    }
    let client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let stream = TcpStream::connect(address).await.expect("a connection");
    let name = ServerName::try_from(host.to_owned()).expect("a DNS name");
    let result = connector
        .connect(name, stream)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string());
    let _ = accept.await;
    result
}

#[tokio::test]
async fn first_start_creates_the_secret_patches_every_ca_bundle_and_serves_a_verifiable_certificate()
 {
    let cluster = CLUSTER.get().await.expect("the cluster");
    let client = cluster.client().expect("a client");
    let settings = setup(&client, "certs-first").await;
    create_configuration(&client, &settings.configuration).await;

    let replica = Replica::start(client.clone(), settings.clone());
    let (secret, ca) = settled(&client, &settings).await;
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let stored = stored(&secret);
    let plan = certificates::plan(
        &stored,
        &certificates::service_dns_names("ocifit-webhook", "certs-first"),
        jiff::Timestamp::now(),
    );
    assert!(
        matches!(plan.action(), certificates::Action::Keep { .. }),
        "the Secret holds a current CA and a serving certificate for the Service: {:?}",
        plan.action()
    );

    let tls = data(&secret, "tls.crt");
    eventually("the serving certificate loaded", async || {
        replica.served.loaded().contains(&tls).then_some(())
    })
    .await;
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

    let probe = Pod {
        metadata: ObjectMeta {
            name: Some("probe".to_owned()),
            labels: Some([("certs-test".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some("app:latest".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
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
    let cluster = CLUSTER.get().await.expect("the cluster");
    let client = cluster.client().expect("a client");
    let settings = setup(&client, "certs-replicas").await;
    create_configuration(&client, &settings.configuration).await;

    // Two replicas that both believe they lead, starting at once: one create wins, the other
    // re-reads.
    let first = Replica::start(client.clone(), settings.clone());
    let second = Replica::start(client.clone(), settings.clone());
    let (secret, _) = settled(&client, &settings).await;
    let tls = data(&secret, "tls.crt");
    for replica in [&first, &second] {
        eventually(
            "both replicas serving the Secret's certificate",
            async || replica.served.loaded().contains(&tls).then_some(()),
        )
        .await;
    }
    let third = Replica::start(client.clone(), settings.clone());
    eventually("a late replica serving the same certificate", async || {
        third.served.loaded().contains(&tls).then_some(())
    })
    .await;
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
async fn an_expiring_serving_certificate_is_renewed_on_time_from_the_same_ca() {
    let cluster = CLUSTER.get().await.expect("the cluster");
    let client = cluster.client().expect("a client");
    let settings = setup(&client, "certs-expiring").await;
    create_configuration(&client, &settings.configuration).await;

    // A CA and a serving certificate valid for 9 more seconds of a 10-second life: due for
    // renewal in about 6 seconds.
    let now = jiff::Timestamp::now();
    let names = certificates::service_dns_names("ocifit-webhook", "certs-expiring");
    let material = certificates::plan(&Stored::default(), &names, now)
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
    eventually("the short-lived certificate served", async || {
        replica.served.loaded().contains(&short_crt).then_some(())
    })
    .await;
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
    eventually("the renewed certificate served", async || {
        replica.served.loaded().contains(&tls).then_some(())
    })
    .await;
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
    let cluster = CLUSTER.get().await.expect("the cluster");
    let client = cluster.client().expect("a client");
    let mut settings = setup(&client, "certs-rotation").await;
    settings.rollover_delay = Duration::from_secs(2);
    create_configuration(&client, &settings.configuration).await;

    // A CA with 30 days left (less than a year: due for rotation) and a current serving
    // certificate from it.
    let names = certificates::service_dns_names("ocifit-webhook", "certs-rotation");
    let ca = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::default();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(1);
    params.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(30);
    let old_ca = params.self_signed(&ca).expect("a CA").pem();
    let old_key = ca.serialize_pem();
    let (old_crt, old_tls_key) = issue(
        &old_ca,
        &old_key,
        &names,
        time::Duration::days(1),
        time::Duration::days(20),
    );
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
    eventually("the new certificate served", async || {
        replica.served.loaded().contains(&new_crt).then_some(())
    })
    .await;
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
    let cluster = CLUSTER.get().await.expect("the cluster");
    let client = cluster.client().expect("a client");
    let settings = setup(&client, "certs-reset").await;
    create_configuration(&client, &settings.configuration).await;
    let _replica = Replica::start(client.clone(), settings.clone());
    let (_, ca) = settled(&client, &settings).await;

    // As `helm upgrade` would: the chart's configuration without a caBundle.
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            &settings.configuration,
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({
                "webhooks": [{"name": "pods.ocifit.io", "clientConfig": {"caBundle": null}}]
            })),
        )
        .await
        .expect("the patch");
    let start = Instant::now();
    eventually("the caBundle restored", async || {
        let found = bundles(&client, &settings.configuration).await;
        found
            .iter()
            .all(|b| b.as_deref() == Some(&ca))
            .then_some(())
    })
    .await;
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "restored on the change, not on the hourly check"
    );
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
    let mut settings = Settings::new(
        "ocifit-system",
        "ocifit-webhook-tls",
        "ocifit-webhook",
        "ocifit",
    );
    settings.retry = Duration::from_millis(200);
    settings.bundle_check = Duration::from_secs(3600);
    for file in std::fs::read_dir(repo().join("config/rbac")).expect("config/rbac") {
        let path = file.expect("a file").path();
        cluster
            .kubectl(["apply", "-f", &path.display().to_string()])
            .await
            .expect("kubectl apply");
    }
    create_configuration(&admin, "ocifit").await;
    let operator = service_account_client(cluster.config(), &admin).await;

    let replica = Replica::start(operator.clone(), settings.clone());
    let (secret, ca) = settled(&admin, &settings).await;
    let tls = data(&secret, "tls.crt");
    eventually("the serving certificate loaded", async || {
        replica.served.loaded().contains(&tls).then_some(())
    })
    .await;
    // The watch on the configuration is allowed too: a reset is restored at once.
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .patch(
            "ocifit",
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({
                "webhooks": [{"name": "pods.ocifit.io", "clientConfig": {"caBundle": null}}]
            })),
        )
        .await
        .expect("the patch");
    eventually("the caBundle restored", async || {
        let found = bundles(&admin, "ocifit").await;
        found
            .iter()
            .all(|b| b.as_deref() == Some(&ca))
            .then_some(())
    })
    .await;

    // Nothing beyond: no other Secret written, no other webhook configuration touched.
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
    let elsewhere = Api::<Secret>::namespaced(operator.clone(), "default")
        .create(&PostParams::default(), &other)
        .await;
    assert!(forbidden(&elsewhere), "{elsewhere:?}");
    create_configuration(&admin, "not-ocifit").await;
    let patch = Api::<MutatingWebhookConfiguration>::all(operator)
        .patch(
            "not-ocifit",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await;
    assert!(forbidden(&patch), "{patch:?}");
}

/// An HTTPS webhook on 127.0.0.1 serving `served`'s certificate that annotates every pod it
/// admits; its URL by the name `localhost`.
async fn serve_admission(served: Arc<Served>) -> String {
    ocifit_testkit::pki::install_crypto_provider();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(served);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(annotate))
                    .await;
            });
        }
    });
    format!("https://localhost:{port}/mutate")
}

async fn annotate(
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, std::convert::Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .expect("a request body")
        .to_bytes();
    let review: AdmissionReview<Pod> = serde_json::from_slice(&body).expect("an AdmissionReview");
    let request: AdmissionRequest<Pod> = review.try_into().expect("a request");
    let patch = serde_json::from_value(serde_json::json!([
        {"op": "add", "path": "/metadata/annotations", "value": {"certs-test/admitted": "yes"}}
    ]))
    .expect("a JSON patch");
    let response = AdmissionResponse::from(&request)
        .with_patch(patch)
        .expect("a patch");
    let body = serde_json::to_vec(&response.into_review()).expect("a review");
    Ok(hyper::Response::new(Full::new(Bytes::from(body))))
}

fn forbidden<T: std::fmt::Debug>(result: &Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(s)) if s.code == 403)
}

/// A client authenticated as the operator's ServiceAccount only.
async fn service_account_client(admin_config: &kube::Config, admin: &Client) -> Client {
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), "ocifit-system")
        .create_token_request(
            "ocifit-controller",
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
        .expect("a token")
        .status
        .expect("a token status")
        .token
        .expect("a token");
    let mut config = admin_config.clone();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..kube::config::AuthInfo::default()
    };
    Client::try_from(config).expect("a client")
}

/// A serving certificate for `names` signed by the CA, valid from `before` ago until `after`
/// from now.
fn issue(
    ca_crt: &str,
    ca_key: &str,
    names: &[String],
    before: time::Duration,
    after: time::Duration,
) -> (String, String) {
    let issuer = rcgen::Issuer::from_ca_cert_pem(
        ca_crt,
        rcgen::KeyPair::from_pem(ca_key).expect("the CA key"),
    )
    .expect("the CA");
    let mut params = rcgen::CertificateParams::new(names.to_vec()).expect("names");
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - before;
    params.not_after = now + after;
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = params.signed_by(&key, &issuer).expect("a certificate");
    (cert.pem(), key.serialize_pem())
}

/// The webhook Secret with `ca.crt`, `ca.key`, `tls.crt`, `tls.key`, as someone else wrote it.
async fn create_secret(client: &Client, settings: &Settings, values: [&String; 4]) {
    let data = ["ca.crt", "ca.key", "tls.crt", "tls.key"]
        .into_iter()
        .zip(values)
        .map(|(key, value)| (key.to_owned(), ByteString(value.as_bytes().to_vec())))
        .collect();
    Api::<Secret>::namespaced(client.clone(), &settings.namespace)
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some(settings.secret.clone()),
                    ..ObjectMeta::default()
                },
                type_: Some("kubernetes.io/tls".to_owned()),
                data: Some(data),
                ..Secret::default()
            },
        )
        .await
        .expect("the Secret");
}

/// The reasons of the Events on the webhook Secret, oldest first.
async fn event_reasons(client: &Client, settings: &Settings) -> Vec<String> {
    let events =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), &settings.namespace);
    let mut found: Vec<_> = events
        .list(&Default::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&settings.secret))
        .collect();
    found.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    found.into_iter().filter_map(|e| e.reason).collect()
}

fn stored(secret: &Secret) -> Stored {
    let get = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
    };
    Stored {
        ca_crt: get("ca.crt"),
        ca_key: get("ca.key"),
        tls_crt: get("tls.crt"),
        tls_key: get("tls.key"),
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
