//! Hostile requests sent straight to the webhook from a loopback client (as anyone on the pod
//! network could): the sizes the hardening issue measured (a 3 MiB `[0,0,…]`), deep nesting, a
//! pod with thousands of containers, a huge affinity, a body over the cap, slow bodies and many
//! connections at once. Every one is answered within the deadline, the resident memory stays
//! under the chart's limit, and the next well-formed pod is admitted normally.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use ocifit::api::pod::ENABLED_LABEL;
use ocifit_testkit::review::{admission_review, create_request};

use super::{CHART_LIMIT_KIB, Served, flavored};
use crate::support::objects::PLACEHOLDER;
/// The host's deadline ([`ocifit::admission::DEADLINE`]) and what loopback TLS on two
/// shared cores adds to it.
const ANSWERED_WITHIN: Duration = Duration::from_secs(4);

/// A review as the apiserver sends it, around `object` (and `options`, JSON text, when given).
pub(super) fn review(object: serde_json::Value, options: Option<String>) -> Vec<u8> {
    let mut request = create_request(&object, false);
    if let Some(options) = options {
        request["options"] = serde_json::from_str(&options).expect("options as JSON");
    }
    admission_review(request)
}

pub(super) fn pod(spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "hostile", "namespace": "faults",
            "labels": {ENABLED_LABEL: "true"}},
        "spec": spec})
}

/// The hostile bodies, by name.
fn bodies() -> Vec<(&'static str, Vec<u8>)> {
    let three_mib = 3 * 1024 * 1024;
    let zeros = |bytes: usize| format!("[{}0]", "0,".repeat(bytes / 2 - 2));
    let containers: Vec<_> = (0..20_000)
        .map(|i| json!({"name": format!("c{i}"), "image": PLACEHOLDER}))
        .collect();
    let values: Vec<String> = (0..100_000).map(|i| format!("z{i}")).collect();
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "NotIn", "values": values}]}]}}});
    vec![
        ("3 MiB array", zeros(three_mib - 16).into_bytes()),
        (
            "3 MiB array as options",
            review(
                pod(json!({"containers": []})),
                Some(zeros(three_mib - 1024)),
            ),
        ),
        ("deep nesting", "[".repeat(three_mib - 16).into_bytes()),
        (
            "20,000 containers",
            review(pod(json!({"containers": containers})), None),
        ),
        (
            "100,000 affinity values",
            review(
                pod(
                    json!({"containers": [{"name": "c", "image": PLACEHOLDER}], "affinity": affinity}),
                ),
                None,
            ),
        ),
        ("4 MiB body", vec![b' '; 4 * 1024 * 1024]),
    ]
}

async fn connect(connector: &TlsConnector, address: &str) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(address).await.expect("a connection");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("a name");
    connector
        .connect(name, tcp)
        .await
        .expect("a TLS connection")
}

/// POST /mutate with `body`, sent whole or (`stall`) its head and a first part only; the
/// status line and how long the answer took from the first byte sent.
pub(super) async fn post(
    connector: TlsConnector,
    address: String,
    body: Arc<Vec<u8>>,
    stall: bool,
) -> (String, Duration) {
    let mut tls = connect(&connector, &address).await;
    let started = Instant::now();
    let head = format!(
        "POST /mutate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = tls.write_all(head.as_bytes()).await;
    if stall {
        let _ = tls.write_all(&body[..body.len().min(100)]).await;
    } else {
        let _ = tls.write_all(&body).await;
    }
    let _ = tls.flush().await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), tls.read_to_end(&mut answer)).await;
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or("(no answer)").to_owned();
    let verdict = if text.contains("TooManyRequests") {
        "busy"
    } else if text.contains("\"allowed\":false") {
        "denied"
    } else if text.contains("\"allowed\":true") {
        "allowed"
    } else {
        "other"
    };
    (format!("{status} {verdict}"), took)
}

#[tokio::test]
async fn hostile_requests_are_answered_within_the_deadline_under_the_memory_limit() {
    let served = Served::start("faults-hostile").await;
    let connector = served.connector();
    let address = served.webhook_address.clone();
    let (rss_before, _) = served.rss_kib();
    let bodies: Vec<_> = bodies()
        .into_iter()
        .map(|(name, body)| (name, Arc::new(body)))
        .collect();

    // One of each, alone.
    let mut slowest = Duration::ZERO;
    for (name, body) in &bodies {
        let (answer, took) =
            post(connector.clone(), address.clone(), Arc::clone(body), false).await;
        let (rss, peak) = served.rss_kib();
        eprintln!(
            "FAULT hostile: {name} ({} bytes): {answer} in {took:?}; RSS {rss} KiB, peak {peak} KiB",
            body.len()
        );
        assert!(answer.starts_with("HTTP/1.1 200"), "{name}: {answer}");
        assert!(took <= ANSWERED_WITHIN, "{name}: {answer} after {took:?}");
        slowest = slowest.max(took);
    }

    // All at once: 32 slow bodies and 96 hostile bodies, each on its own connection.
    let mut requests = JoinSet::new();
    for i in 0..128 {
        let (_, body) = &bodies[i % bodies.len()];
        requests.spawn(post(
            connector.clone(),
            address.clone(),
            Arc::clone(body),
            i < 32,
        ));
    }
    let mut by_answer = std::collections::BTreeMap::<String, usize>::new();
    while let Some(joined) = requests.join_next().await {
        let (answer, took) = joined.expect("a request");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(took <= ANSWERED_WITHIN, "{answer} after {took:?}");
        slowest = slowest.max(took);
        *by_answer.entry(answer).or_default() += 1;
    }
    let (rss_after, peak) = served.rss_kib();
    eprintln!(
        "FAULT hostile: 128 at once {by_answer:?}; slowest answer {slowest:?}; RSS {rss_before} KiB \
         before, {rss_after} KiB after, peak {peak} KiB (chart limit {CHART_LIMIT_KIB} KiB)"
    );
    assert!(peak < CHART_LIMIT_KIB, "peak RSS {peak} KiB");

    // The next well-formed pod, through the apiserver.
    let started = Instant::now();
    let image = served
        .create(&flavored("after", "chocolate"))
        .await
        .expect("the next pod admitted");
    assert_eq!(image, served.by_flavor["chocolate"]);
    eprintln!(
        "FAULT hostile: the next pod admitted in {:?}",
        started.elapsed()
    );
}
