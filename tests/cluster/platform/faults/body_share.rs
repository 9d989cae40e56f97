//! Large stalled bodies from one address: 24 connections from 127.0.0.2 (a loopback address of
//! their own, as a pod on the pod network has one apart from the apiserver's; the apiserver
//! reaches the webhook from 127.0.0.1) each send ~2.8 MiB of a 3 MiB body and stall, each
//! re-opened as soon as the host answers it, for a minute, half on the placement gate's path and
//! half on the image route's. Together they would hold 67 MiB, more than the host's 48 MiB for
//! bodies; each address may hold a quarter of it, so meanwhile 200 pods in a namespace no
//! PlacementPolicy selects and 200 opted-in pods, created through the apiserver across the
//! minute, are all admitted at their first attempt, the opted-in ones with their image, and the
//! gate plans every plain pod (none admitted unchanged as busy).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use super::Served;
use super::slow_bodies::{NO_POLICY, create_pair, gate_unselected};

/// Connections sending large bodies and stalling.
const STALLED: usize = 24;
/// What each declares, and what it sends of it.
const DECLARED: usize = 3 * 1024 * 1024;
const SENT: usize = 2800 * 1024;
/// Where they come from: not the apiserver's address.
const HOSTILE: &str = "127.0.0.2";
/// How long the flood lasts; the pods are created across it.
const FLOOD: Duration = Duration::from_secs(60);
/// Pods created in each namespace.
const PODS: usize = 200;
/// Workers creating pods, one pair after the other each, paced to span the flood.
const WORKERS: usize = 8;

#[tokio::test]
async fn large_stalled_bodies_from_one_address_refuse_no_pod_of_any_namespace() {
    let served = Served::start("faults-body-share").await;
    gate_unselected(&served).await;
    let mut config = served.env.cluster.config().clone();
    config.default_retry = false;
    let client = Client::try_from(config).expect("a client");
    let no_policy_before = served.controller.metric(NO_POLICY).await;

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut stalled = JoinSet::new();
    for i in 0..STALLED {
        let path = if i % 2 == 0 { "/placement" } else { "/mutate" };
        stalled.spawn(stall(
            served.connector(),
            served.webhook_address.clone(),
            path,
            Arc::clone(&stop),
            Arc::clone(&answered),
        ));
    }
    // The flood is in place once the host has answered a round of it.
    let started = Instant::now();
    while answered.load(Ordering::Relaxed) < STALLED {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the stalled connections were never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let started = Instant::now();
    let pace = FLOOD / u32::try_from(PODS / WORKERS).expect("a count");
    let mut creators = JoinSet::new();
    for worker in 0..WORKERS {
        let client = client.clone();
        let expected = served.by_flavor["vanilla"].clone();
        creators.spawn(async move {
            let mut failures = Vec::new();
            for i in (worker..PODS).step_by(WORKERS) {
                let next = tokio::time::Instant::now() + pace;
                create_pair(&client, i, &expected, &mut failures).await;
                tokio::time::sleep_until(next).await;
            }
            failures
        });
    }
    let failures: Vec<String> = creators.join_all().await.into_iter().flatten().collect();
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    stalled.join_all().await;
    let (rss, peak) = served.rss_kib();
    let planned = served.controller.metric(NO_POLICY).await - no_policy_before;
    eprintln!(
        "FAULT body-share: {STALLED} connections from {HOSTILE} each sending {} KiB of {} KiB and \
         stalling ({} answered, each re-opened at once) for {took:?}; {} pods created, {} \
         refused; /placement planned {planned} of the {PODS} plain pods; RSS {rss} KiB, peak \
         {peak} KiB",
        SENT / 1024,
        DECLARED / 1024,
        answered.load(Ordering::Relaxed),
        2 * PODS,
        failures.len()
    );
    assert!(failures.is_empty(), "refused: {failures:#?}");
    assert!(
        planned >= PODS as f64,
        "the gate admitted {} plain pods unplanned",
        PODS as f64 - planned
    );
}

/// One hostile client from [`HOSTILE`]: a request to `path` declaring [`DECLARED`] bytes, of
/// which it sends [`SENT`] and stalls, again and again until `stop`; each answer counted.
async fn stall(
    connector: TlsConnector,
    address: String,
    path: &'static str,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
) {
    let target: std::net::SocketAddr = address.parse().expect("the webhook's address");
    let padding = vec![b' '; SENT];
    while !stop.load(Ordering::Relaxed) {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket
            .bind(format!("{HOSTILE}:0").parse().expect("an address"))
            .expect("bound to the hostile address");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("a name");
        let tls = match socket.connect(target).await {
            Ok(tcp) => connector.connect(name, tcp).await,
            Err(e) => Err(e),
        };
        let Ok(tls) = tls else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (mut reader, mut writer) = tokio::io::split(tls);
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n\
             Content-Length: {DECLARED}\r\n\r\n{{\"request\":{{\"uid\":\"stalled\",\"x\":\""
        );
        let sending = async {
            let _ = writer.write_all(head.as_bytes()).await;
            // The host stops reading a body it has no room for: the rest waits in the network.
            let _ = writer.write_all(&padding).await;
            let _ = writer.flush().await;
            std::future::pending::<()>().await;
        };
        let answer = async {
            let mut buffer = [0u8; 4096];
            matches!(reader.read(&mut buffer).await, Ok(1..))
        };
        tokio::select! {
            () = sending => {}
            got = answer => {
                if got {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}
