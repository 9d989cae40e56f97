//! For the managed-certificate scenarios: a replica's certificate manager run in process with a
//! TLS resolver standing for the webhook's, the objects the scenarios create and read, a TLS
//! server and an HTTPS admission webhook that use the managed certificate, and a client
//! authenticated as the operator's ServiceAccount.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{ObjectMeta, PostParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::{Api, Client};
use ocifit::admission::TlsError;
use ocifit::admission::{
    CertificateSettings, CertificateSink, StoredCertificates, manage_certificates,
};
use ocifit_testkit::{Cluster, create_namespace};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

pub use super::data;
use super::{access, https};

pub const WAIT: Duration = Duration::from_secs(20);

/// Stands for the webhook's TLS resolver: serves the last certificate loaded, and remembers
/// every one.
#[derive(Debug, Default)]
pub struct Served {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    loaded: Mutex<Vec<String>>,
}

impl CertificateSink for Served {
    fn load(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
        let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(TlsError::CertificatePem)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(TlsError::KeyPem)?;
        let key = rustls::crypto::ring::sign::any_supported_type(&key).map_err(TlsError::Key)?;
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
    pub fn loaded(&self) -> Vec<String> {
        self.loaded.lock().expect("the loaded lock").clone()
    }
}

/// One replica's certificate manager, running until dropped.
pub struct Replica {
    pub served: Arc<Served>,
    leading: watch::Sender<bool>,
    _stop: oneshot::Sender<()>,
}

impl Replica {
    /// A replica that leads.
    pub fn start(client: Client, settings: CertificateSettings) -> Replica {
        let replica = Replica::start_following(client, settings);
        replica.lead(true);
        replica
    }

    /// A replica that does not lead until [`Replica::lead`] says so.
    pub fn start_following(client: Client, settings: CertificateSettings) -> Replica {
        let served = Arc::new(Served::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let (leading, leadership) = watch::channel(false);
        let sink: Arc<dyn CertificateSink> = served.clone();
        tokio::spawn(manage_certificates(
            client,
            settings,
            leadership,
            sink,
            async {
                let _ = stopped.await;
            },
        ));
        Replica {
            served,
            leading,
            _stop: stop,
        }
    }

    /// Makes this replica lead, or follow.
    pub fn lead(&self, leads: bool) {
        self.leading.send_replace(leads);
    }
}

/// A namespace of its own and settings with this test's names, checked quickly.
pub async fn setup(client: &Client, namespace: &str) -> CertificateSettings {
    create_namespace(client, namespace)
        .await
        .expect("a namespace");
    let mut settings =
        CertificateSettings::new(namespace, "webhook-tls", "ocifit-webhook", namespace);
    settings.identity = format!("{namespace}-replica");
    settings.retry = Duration::from_millis(200);
    // Long enough that only the watches explain a prompt reaction.
    settings.bundle_check = Duration::from_secs(3600);
    settings
}

/// A configuration with two webhooks and no caBundle.
pub async fn create_configuration(client: &Client, name: &str) {
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

pub async fn get_secret(client: &Client, namespace: &str, name: &str) -> Option<Secret> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .expect("the Secret read")
}

/// The caBundle of each webhook of the configuration.
pub async fn bundles(client: &Client, name: &str) -> Vec<Option<String>> {
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

pub async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
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
pub async fn settled(client: &Client, settings: &CertificateSettings) -> (Secret, String) {
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
pub async fn handshake(served: Arc<Served>, ca_bundle: &str, host: &str) -> Result<(), String> {
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
    let result = access::handshake(&address.to_string(), ca_bundle, host)
        .await
        .map(|_| ());
    let _ = accept.await;
    result
}

/// An HTTPS webhook on 127.0.0.1 serving `served`'s certificate that annotates every pod it
/// admits; its URL by the name `localhost`.
pub async fn serve_admission(served: Arc<Served>) -> String {
    ocifit_testkit::pki::install_crypto_provider();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(served);
    let address = https::serve_https(Arc::new(config), annotate).await;
    format!("https://localhost:{}/mutate", address.port())
}

pub async fn annotate(
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

pub fn forbidden<T: std::fmt::Debug>(result: &Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(s)) if s.code == 403)
}

/// A client authenticated as the operator's ServiceAccount only.
pub async fn service_account_client(cluster: &Cluster) -> Client {
    let kubeconfig =
        access::service_account_kubeconfig(cluster, "ocifit-system", "ocifit-controller").await;
    access::client_from(&kubeconfig).await
}

/// A serving certificate for `names` signed by the CA, valid from `before` ago until `after`
/// from now.
pub fn issue(
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

/// A self-signed CA (certificate, key: PEM) valid from a day ago until `left` from now.
pub fn ca_ending_in(left: time::Duration) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::default();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(1);
    params.not_after = time::OffsetDateTime::now_utc() + left;
    let cert = params.self_signed(&key).expect("a CA").pem();
    (cert, key.serialize_pem())
}

/// The webhook Secret with `ca.crt`, `ca.key`, `tls.crt`, `tls.key`, as someone else wrote it.
pub async fn create_secret(client: &Client, settings: &CertificateSettings, values: [&String; 4]) {
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
pub async fn event_reasons(client: &Client, settings: &CertificateSettings) -> Vec<String> {
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

pub fn stored(secret: &Secret) -> StoredCertificates {
    let get = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
    };
    StoredCertificates {
        ca_crt: get("ca.crt"),
        ca_key: get("ca.key"),
        tls_crt: get("tls.crt"),
        tls_key: get("tls.key"),
    }
}
