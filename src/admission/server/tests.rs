//! The host over real HTTPS in-process: a rustls client against the actix server, with
//! AdmissionReviews as the apiserver sends them and with garbage, answered by a small planner
//! of the test's own (features test their routes through the host themselves).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ocifit_testkit::pki::CertificateAuthority;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::admission::request::Request;
use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::admission::review::tests::{UID, a_pod, apiserver_review, uid_first};
use crate::admission::route::{Planner, Response, Verdict};
use crate::admission::tls::CertFiles;

mod bounds;
mod events;
mod peer_share;
mod reads;

/// Admits pods labelled `app`, refuses the others.
struct AppLabel;

struct Judged(bool);

impl Verdict for Judged {
    fn outcome(&self) -> &'static str {
        if self.0 { "allowed" } else { "refused" }
    }

    fn reason(&self) -> &'static str {
        if self.0 { "Labelled" } else { "Unlabelled" }
    }

    fn response(&self) -> Response<'_> {
        if self.0 {
            Response::Allow {
                patch: None,
                warnings: Vec::new(),
            }
        } else {
            Response::Deny("label the pod app".into())
        }
    }
}

impl Planner for AppLabel {
    type Object = Pod;
    type Plan = Judged;

    fn plan(&self, request: &Request<Pod>) -> Judged {
        let labelled = request
            .object
            .as_ref()
            .and_then(|pod| pod.metadata.labels.as_ref())
            .is_some_and(|labels| labels.contains_key("app"));
        Judged(labelled)
    }
}

struct Served {
    address: SocketAddr,
    draining: Arc<AtomicBool>,
    connector: TlsConnector,
    metrics: Arc<Metrics>,
    cert: Arc<ServingCert>,
    ca: CertificateAuthority,
    handle: actix_web::dev::ServerHandle,
}

/// The host on 127.0.0.1 with a certificate of a fresh CA, `POST /check` answered by
/// [`AppLabel`].
async fn serve() -> Served {
    serve_with(DEADLINE).await
}

async fn serve_with(deadline: Duration) -> Served {
    serve_routes(deadline, vec![Route::new("/check", AppLabel)]).await
}

/// The host with these routes and deadline.
async fn serve_routes(deadline: Duration, routes: Vec<Route>) -> Served {
    serve_host(deadline, routes, None).await
}

/// The host with these routes and deadline, requiring client certificates from `client_ca`
/// when given.
async fn serve_host(deadline: Duration, routes: Vec<Route>, client_ca: Option<Vec<u8>>) -> Served {
    serve_clients(deadline, routes, client_ca, Uncertified::Refuse).await
}

/// As [`serve_host`], a client without a certificate getting `uncertified`.
async fn serve_clients(
    deadline: Duration,
    routes: Vec<Route>,
    client_ca: Option<Vec<u8>>,
    uncertified: Uncertified,
) -> Served {
    ocifit_testkit::pki::install_crypto_provider();
    let ca = CertificateAuthority::new("webhook test CA").unwrap();
    let issued = ca.issue_server("webhook", &["127.0.0.1"]).unwrap();
    let cert = ServingCert::new();
    cert.set_pem(issued.cert_pem.as_bytes(), issued.key_pem.as_bytes())
        .unwrap();
    let metrics = Metrics::new(None);
    let draining = Arc::new(AtomicBool::new(false));
    let (server, address) = admission_server(
        "127.0.0.1:0".parse().unwrap(),
        Arc::clone(&cert),
        Host {
            routes,
            metrics: Arc::clone(&metrics),
            deadline,
            draining: Arc::clone(&draining),
            client_ca,
            uncertified,
        },
    )
    .unwrap();
    let handle = server.handle();
    tokio::spawn(server);
    let connector = connector(&ca);
    Served {
        address,
        draining,
        connector,
        metrics,
        cert,
        ca,
        handle,
    }
}

fn connector(ca: &CertificateAuthority) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Every connection a full handshake, so each one shows the certificate served now.
    config.resumption = rustls::client::Resumption::disabled();
    TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 request on a new TLS connection: (status, body, the server's leaf certificate).
async fn call(
    served: &Served,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, Vec<u8>, CertificateDer<'static>) {
    let tcp = TcpStream::connect(served.address).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = served.connector.connect(name, tcp).await.unwrap();
    let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(body).await.unwrap();
    let mut response = Vec::new();
    tls.read_to_end(&mut response).await.unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = response[split + 4..].to_vec();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (status, if chunked { unchunk(&body) } else { body }, leaf)
}

fn unchunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..line]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[line + 2..line + 2 + size]);
        body = &body[line + 4 + size..];
    }
}

/// POST /check: asserts the 200 and the review; the response part.
async fn check(served: &Served, body: &[u8]) -> Value {
    let (status, body, _) = call(served, "POST", "/check", body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let review: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(review["kind"], "AdmissionReview");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    review["response"].clone()
}

fn message(response: &Value) -> &str {
    response["status"]["message"].as_str().unwrap_or_default()
}

async fn count(served: &Served, outcome: &str, reason: &str) -> u64 {
    let text = served.metrics.encode().unwrap();
    // Summed over the routes: each series also names the route that answered; the reason is
    // counted in snake_case.
    let reason = crate::telemetry::snake_case(reason);
    let labels = format!(",outcome=\"{outcome}\",reason=\"{reason}\"}} ");
    text.lines()
        .filter(|l| l.starts_with("ocifit_admissions_total{route=\""))
        .filter_map(|l| l.split_once(&labels)?.1.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn each_review_gets_its_planners_answer_with_its_uid_counted_under_its_labels() {
    let served = serve().await;
    let review = |pod: &Pod| serde_json::to_vec(&apiserver_review(pod, false)).unwrap();
    let response = check(&served, &review(&a_pod())).await;
    assert_eq!(
        (response["uid"].as_str(), response["allowed"].as_bool()),
        (Some(UID), Some(true))
    );
    let mut unlabelled = a_pod();
    unlabelled.metadata.labels = None;
    let response = check(&served, &review(&unlabelled)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(message(&response), "label the pod app");
    assert_eq!(count(&served, "allowed", "Labelled").await, 1);
    assert_eq!(count(&served, "refused", "Unlabelled").await, 1);
    let text = served.metrics.encode().unwrap();
    assert!(
        text.contains(
            "ocifit_admissions_total{route=\"/check\",outcome=\"allowed\",reason=\"labelled\"} 1"
        ),
        "the series names the route that answered:\n{text}"
    );
    served.handle.stop(true).await;
}

#[tokio::test]
async fn garbage_empty_oversized_and_foreign_bodies_get_a_denial_never_a_500() {
    let served = serve().await;
    let mut deployment = apiserver_review(&a_pod(), false);
    deployment["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let oversized = vec![b' '; MAX_BODY_BYTES + 1];
    let cases: [(&str, &[u8], &str, &str); 5] = [
        ("empty", b"", "", "empty"),
        ("garbage", b"\x00\x01garbage{{", "", "not JSON"),
        (
            "a JSON array",
            b"[1,2]",
            "",
            "expected an admission.k8s.io/v1 AdmissionReview",
        ),
        (
            "a Deployment",
            &serde_json::to_vec(&deployment).unwrap(),
            UID,
            "pods only",
        ),
        ("over 3 MiB", &oversized, "", "over ocifit's limit"),
    ];
    for (what, body, uid, says) in cases {
        let response = check(&served, body).await;
        assert_eq!(response["uid"], uid, "{what}");
        assert_eq!(response["allowed"], false, "{what}");
        assert!(message(&response).contains(says), "{what}: {response}");
    }
    assert_eq!(count(&served, "denied", "BodyTooLarge").await, 1);
    assert_eq!(count(&served, "denied", "MalformedReview").await, 3);
    served.handle.stop(true).await;
}

#[tokio::test]
async fn other_methods_and_paths_are_refused_by_http_status() {
    let served = serve().await;
    assert_eq!(call(&served, "GET", "/check", b"").await.0, 405);
    assert_eq!(call(&served, "POST", "/validate", b"{}").await.0, 404);
    served.handle.stop(true).await;
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_denied_naming_the_deadline() {
    let served = serve_with(Duration::from_millis(300)).await;
    let tcp = TcpStream::connect(served.address).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = served.connector.connect(name, tcp).await.unwrap();
    let head = "POST /check HTTP/1.1\r\nHost: webhook\r\nContent-Length: 1000\r\n\r\n{\"kind\":";
    tls.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut response)).await;
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("deadline of 300ms"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(count(&served, "denied", "Timeout").await, 1);
    served.handle.stop(true).await;
}

/// Writes a certificate pair as a Secret volume does: files under a timestamped directory,
/// reached through `..data`, which is swapped by renaming a new symlink over it.
fn publish_secret(dir: &Path, generation: u32, cert_pem: &str, key_pem: &str) {
    let data = dir.join(format!("..2026_11_22_{generation}"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("tls.crt"), cert_pem).unwrap();
    std::fs::write(data.join("tls.key"), key_pem).unwrap();
    let staged = dir.join("..data_tmp");
    std::os::unix::fs::symlink(data.file_name().unwrap(), &staged).unwrap();
    std::fs::rename(&staged, dir.join("..data")).unwrap();
    for file in ["tls.crt", "tls.key"] {
        if !dir.join(file).exists() {
            std::os::unix::fs::symlink(Path::new("..data").join(file), dir.join(file)).unwrap();
        }
    }
}

#[tokio::test]
async fn a_rotated_secret_volume_is_served_to_new_handshakes_without_a_failed_request() {
    let served = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let first = served.ca.issue_server("first", &["127.0.0.1"]).unwrap();
    publish_secret(dir.path(), 1, &first.cert_pem, &first.key_pem);
    let files = CertFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let watcher = tokio::spawn(files.watch(Arc::clone(&served.cert), Duration::from_millis(20)));
    let first_der = CertificateDer::from_pem_slice(first.cert_pem.as_bytes()).unwrap();
    let body = serde_json::to_vec(&apiserver_review(&a_pod(), false)).unwrap();

    // Until the watcher has loaded the first pair, then across the swap to the second.
    let second = served.ca.issue_server("second", &["127.0.0.1"]).unwrap();
    let second_der = CertificateDer::from_pem_slice(second.cert_pem.as_bytes()).unwrap();
    let mut seen_first = false;
    let mut swapped = false;
    for _ in 0..400 {
        let (status, response, leaf) = call(&served, "POST", "/check", &body).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&response));
        let review: Value = serde_json::from_slice(&response).unwrap();
        assert_eq!(review["response"]["uid"], UID);
        if leaf == first_der {
            seen_first = true;
            if !swapped {
                publish_secret(dir.path(), 2, &second.cert_pem, &second.key_pem);
                swapped = true;
            }
        } else if leaf == second_der {
            assert!(
                seen_first,
                "the second certificate was served before the first"
            );
            watcher.abort();
            served.handle.stop(true).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!(
        "the rotated certificate was not served (first seen: {seen_first}); on disk: {:?}",
        std::fs::read_to_string(dir.path().join("tls.crt")).map(|c| c == second.cert_pem)
    );
}

/// POST /check with a review on a new connection through `connector`: the status, or why there
/// was none.
async fn try_check(served: &Served, connector: &TlsConnector) -> Result<u16, String> {
    let tcp = TcpStream::connect(served.address).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let body = serde_json::to_vec(&apiserver_review(&a_pod(), false)).unwrap();
    let head = format!(
        "POST /check HTTP/1.1\r\nHost: webhook\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    // With TLS 1.3 the client finishes its side of the handshake first: a refusal arrives as an
    // alert on the first read (or write).
    tls.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    tls.write_all(&body)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut response = Vec::new();
    tls.read_to_end(&mut response)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))
}

/// A connector trusting `ca` and presenting `client` (certificate and key PEM).
fn connector_with_client(
    ca: &CertificateAuthority,
    client: &ocifit_testkit::pki::IssuedCert,
) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap())
        .unwrap();
    let chain = CertificateDer::pem_slice_iter(client.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(client.key_pem.as_bytes()).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    TlsConnector::from(Arc::new(config))
}

/// A client with a certificate from another CA than `clients` is refused at the handshake; one
/// from `clients` is answered.
async fn answers_only_certificates_from(served: &Served, clients: &CertificateAuthority) {
    let other_ca = CertificateAuthority::new("someone else").unwrap();
    let foreign = other_ca.issue_client("mallory", None).unwrap();
    let foreign = try_check(served, &connector_with_client(&served.ca, &foreign)).await;
    assert!(
        foreign.is_err(),
        "a certificate from another CA: {foreign:?}"
    );
    let apiserver = clients.issue_client("kube-apiserver", None).unwrap();
    let answered = try_check(served, &connector_with_client(&served.ca, &apiserver)).await;
    assert_eq!(answered, Ok(200));
}

#[tokio::test]
async fn with_a_client_ca_only_a_client_with_a_certificate_from_it_is_answered() {
    ocifit_testkit::pki::install_crypto_provider();
    let apiserver_clients = CertificateAuthority::new("apiserver clients").unwrap();
    let served = serve_host(
        DEADLINE,
        vec![Route::new("/check", AppLabel)],
        Some(apiserver_clients.cert_pem().as_bytes().to_vec()),
    )
    .await;
    let without = try_check(&served, &served.connector).await;
    assert!(
        without.is_err(),
        "a client without a certificate: {without:?}"
    );
    answers_only_certificates_from(&served, &apiserver_clients).await;
    assert_eq!(count(&served, "allowed", "Labelled").await, 1);
    served.handle.stop(true).await;
}

#[tokio::test]
async fn without_a_client_ca_any_client_is_answered() {
    let served = serve().await;
    assert_eq!(try_check(&served, &served.connector).await, Ok(200));
    served.handle.stop(true).await;
}

#[test]
fn a_client_ca_file_without_a_certificate_is_refused_at_start() {
    let err = ServingCert::server_config_for_clients(
        ServingCert::new(),
        Some(b"not a PEM"),
        Uncertified::Refuse,
    )
    .unwrap_err();
    assert!(matches!(err, TlsError::NoClientCa), "{err:?}");
}
