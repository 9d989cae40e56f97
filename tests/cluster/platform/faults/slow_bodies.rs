//! Slow bodies from anyone who reaches the webhook port: 64 connections held open to it (TLS,
//! the request head sent, the body trickled a byte every 100 ms; a new one as soon as the host
//! answers one), half on the placement gate's path and half on the image route's, while pods
//! are created through the apiserver: 200 in a namespace no PlacementPolicy selects (through
//! `/placement`) and 200 opted in (through `/mutate`). Every pod is admitted at its first
//! attempt (the client does not retry, and both webhooks fail closed), the opted-in ones with
//! their flavor's image: a slow body holds no place of any route. The slow bodies themselves are
//! answered at the deadline as each route's failure policy would: the gate admits them unchanged,
//! the image route denies them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use ocifit_testkit::{PodWebhook, create_namespace, register_pod_webhook};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use super::hostile::{pod, review};
use super::{NAMESPACE, Served, flavored};
use crate::support::objects::{PLACEHOLDER, TestPod};
use crate::support::webhook::image;

/// Connections trickling their bodies.
const SLOW: usize = 64;
/// Pods created in each namespace.
const PODS: usize = 200;
/// Workers creating pods, one after the other each.
const WORKERS: usize = 8;
/// The namespace no PlacementPolicy selects, gated by `/placement`.
pub(super) const UNSELECTED: &str = "unselected";
pub(super) const NO_POLICY: &str = "ocifit_admissions_total{route=\"/placement\",outcome=\"skipped\",reason=\"no_placement_policy\"}";
const ACTIVE_WITHIN: Duration = Duration::from_secs(30);

#[tokio::test]
async fn slow_bodies_on_the_webhook_port_refuse_no_pod_of_any_namespace() {
    let served = Served::start("faults-slow-bodies").await;
    gate_unselected(&served).await;
    // A client that does not retry: any refusal is a failed creation.
    let mut config = served.env.cluster.config().clone();
    config.default_retry = false;
    let client = Client::try_from(config).expect("a client");

    let stop = Arc::new(AtomicBool::new(false));
    let (gate, image_route) = (Arc::new(Answers::default()), Arc::new(Answers::default()));
    let mut slow = JoinSet::new();
    for i in 0..SLOW {
        let (path, answers) = if i % 2 == 0 {
            ("/placement", &gate)
        } else {
            ("/mutate", &image_route)
        };
        slow.spawn(trickle(
            served.connector(),
            served.webhook_address.clone(),
            path,
            Arc::clone(&stop),
            Arc::clone(answers),
        ));
    }
    // Every slow connection has sent its head before the first pod is created.
    let (_, peak_before) = served.rss_kib();
    wait_connected(&gate, &image_route).await;

    let started = Instant::now();
    let mut creators = JoinSet::new();
    for worker in 0..WORKERS {
        let client = client.clone();
        let expected = served.by_flavor["vanilla"].clone();
        creators.spawn(async move {
            let mut failures = Vec::new();
            for i in (worker..PODS).step_by(WORKERS) {
                create_pair(&client, i, &expected, &mut failures).await;
            }
            failures
        });
    }
    let failures: Vec<String> = creators.join_all().await.into_iter().flatten().collect();
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let slow_answered = gate.total() + image_route.total();
    slow.join_all().await;
    let (rss, peak) = served.rss_kib();
    eprintln!(
        "FAULT slow-bodies: {SLOW} slow-body connections ({slow_answered} answered at the \
         deadline, each replaced at once); {} pods created in {took:?}, {} refused; RSS {rss} \
         KiB, peak {peak} KiB ({peak_before} KiB before)",
        2 * PODS,
        failures.len()
    );
    assert!(failures.is_empty(), "refused: {failures:#?}");
    // Each route answers its own slow bodies as its failure policy would: the gate admits them
    // unchanged, the image route denies them, to retry.
    let (gate_allowed, gate_denied) = (
        gate.allowed.load(Ordering::Relaxed),
        gate.denied.load(Ordering::Relaxed),
    );
    let (image_allowed, image_denied) = (
        image_route.allowed.load(Ordering::Relaxed),
        image_route.denied.load(Ordering::Relaxed),
    );
    eprintln!(
        "FAULT slow-bodies: the slow bodies themselves: /placement {gate_allowed} admitted \
         unchanged, {gate_denied} denied; /mutate {image_allowed} admitted, {image_denied} denied"
    );
    assert_eq!(gate_denied, 0, "the gate denied a slow body");
    assert_eq!(image_allowed, 0, "the image route admitted a slow body");
    let no_policy = served.controller.metric(NO_POLICY).await;
    eprintln!("FAULT slow-bodies: /placement answered {no_policy} pods NoPlacementPolicy");
    assert!(no_policy >= PODS as f64, "{no_policy}");
}

/// Registers `/placement` for pods of [`UNSELECTED`] (created here) and waits until the host
/// answers a dry run there.
pub(super) async fn gate_unselected(served: &Served) {
    let client = &served.env.client;
    create_namespace(client, UNSELECTED)
        .await
        .expect("the namespace");
    let webhook = PodWebhook::new(
        "ocifit-slow-bodies-gate",
        &format!("https://{}/placement", served.webhook_address),
        served.certificate.ca.cert_pem(),
    )
    .in_namespace(UNSELECTED);
    register_pod_webhook(client, &webhook)
        .await
        .expect("the gate's webhook configuration");
    let before = served.controller.metric(NO_POLICY).await;
    let probe = TestPod::named("probe").build();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let started = Instant::now();
    loop {
        let _ = Api::<Pod>::namespaced(client.clone(), UNSELECTED)
            .create(&dry_run, &probe)
            .await;
        if served.controller.metric(NO_POLICY).await > before {
            return;
        }
        assert!(
            started.elapsed() < ACTIVE_WITHIN,
            "the gate webhook never called"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until each slow connection has sent its head: the host answers the first round of
/// them at its deadline, so the flood is in place once as many answers came back.
async fn wait_connected(gate: &Answers, image_route: &Answers) {
    let started = Instant::now();
    while gate.total() + image_route.total() < SLOW {
        assert!(
            started.elapsed() < ACTIVE_WITHIN,
            "the slow connections were never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How the host answered one path's slow requests.
#[derive(Default)]
struct Answers {
    allowed: AtomicUsize,
    denied: AtomicUsize,
}

impl Answers {
    fn record(&self, allowed: bool) {
        let count = if allowed { &self.allowed } else { &self.denied };
        count.fetch_add(1, Ordering::Relaxed);
    }

    fn total(&self) -> usize {
        self.allowed.load(Ordering::Relaxed) + self.denied.load(Ordering::Relaxed)
    }
}

/// One slow client: a request to `path` whose body comes a byte every 100 ms, again and again
/// until `stop`; each answer from the host recorded in `answered`.
async fn trickle(
    connector: TlsConnector,
    address: String,
    path: &'static str,
    stop: Arc<AtomicBool>,
    answered: Arc<Answers>,
) {
    let body = review(
        pod(json!({"containers": [{"name": "c", "image": PLACEHOLDER}]})),
        None,
    );
    while !stop.load(Ordering::Relaxed) {
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("a name");
        let tls = match TcpStream::connect(&address).await {
            Ok(tcp) => connector.connect(name, tcp).await,
            Err(e) => Err(e),
        };
        let Ok(tls) = tls else {
            // Refused (connections beyond the host's own bound wait in the backlog): again, at
            // the pace of the trickle.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (mut reader, mut writer) = tokio::io::split(tls);
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        if writer.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        let trickling = async {
            for byte in &body[..body.len() - 1] {
                if writer.write_all(&[*byte]).await.is_err() || writer.flush().await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            std::future::pending::<()>().await;
        };
        let answer = async {
            let mut answer = Vec::new();
            let mut buffer = [0u8; 4096];
            while let Ok(read @ 1..) = reader.read(&mut buffer).await {
                answer.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&answer);
                if text.contains("\"allowed\":true") {
                    return Some(true);
                }
                if text.contains("\"allowed\":false") {
                    return Some(false);
                }
            }
            None
        };
        tokio::select! {
            () = trickling => {}
            allowed = answer => {
                if let Some(allowed) = allowed {
                    answered.record(allowed);
                }
            }
        }
    }
}

/// Creates the plain pod `plain-{i}` in [`UNSELECTED`] and the opted-in vanilla pod `opted-{i}`
/// in the scenarios' namespace, noting in `failures` a refusal, or an opted-in pod not given
/// `expected`.
pub async fn create_pair(client: &Client, i: usize, expected: &str, failures: &mut Vec<String>) {
    let plain = TestPod::named(&format!("plain-{i}")).build();
    if let Err(e) = Api::<Pod>::namespaced(client.clone(), UNSELECTED)
        .create(&PostParams::default(), &plain)
        .await
    {
        failures.push(format!("plain-{i}: {e}"));
    }
    let opted = flavored(&format!("opted-{i}"), "vanilla");
    match Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &opted)
        .await
    {
        Ok(stored) if image(&stored) == expected => {}
        Ok(stored) => failures.push(format!("opted-{i}: {}", image(&stored))),
        Err(e) => failures.push(format!("opted-{i}: {e}")),
    }
}
