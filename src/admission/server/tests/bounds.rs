//! The host's bounds over real HTTPS: bodies are read before a place is taken (slow bodies hold
//! none), places are per route, each route answers what it cannot decide as its failure policy
//! would (a retriable denial, or admitted unchanged), the deadline holds over planning as well as
//! the body, and a draining host closes each connection after its answer.

use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::admission::route::Undecided;

/// A planner that takes `delay` to decide while `slow` is set.
struct Slow {
    slow: Arc<AtomicBool>,
    delay: Duration,
}

impl Planner for Slow {
    type Object = Pod;
    type Plan = Judged;

    fn plan(&self, _: &Request<Pod>) -> Judged {
        if self.slow.load(Ordering::SeqCst) {
            std::thread::sleep(self.delay);
        }
        Judged(true)
    }
}

/// Admits every pod, noting the name of the thread it planned on; `BOUNDED` as given.
struct Whereabouts<const BOUNDED: bool>(Arc<std::sync::Mutex<Vec<String>>>);

impl<const B: bool> Planner for Whereabouts<B> {
    type Object = Pod;
    type Plan = Judged;

    const BOUNDED: bool = B;

    fn plan(&self, _: &Request<Pod>) -> Judged {
        let thread = std::thread::current().name().unwrap_or_default().to_owned();
        self.0.lock().unwrap().push(thread);
        Judged(true)
    }
}

/// A planner the request bounds that must wait for every request (as the gate must for a
/// namespace its store does not hold): declines on the worker, notes the thread it planned on.
struct MustWait(Arc<std::sync::Mutex<Vec<String>>>);

impl Planner for MustWait {
    type Object = Pod;
    type Plan = Judged;

    const BOUNDED: bool = true;

    fn plan(&self, _: &Request<Pod>) -> Judged {
        let thread = std::thread::current().name().unwrap_or_default().to_owned();
        self.0.lock().unwrap().push(thread);
        Judged(true)
    }

    fn plan_now(&self, _: &Request<Pod>) -> Option<Judged> {
        None
    }
}

/// A planner the request bounds that panics.
struct Panics;

impl Planner for Panics {
    type Object = Pod;
    type Plan = Judged;

    const BOUNDED: bool = true;

    fn plan(&self, _: &Request<Pod>) -> Judged {
        panic!("a planner's bug");
    }
}

/// A TLS connection that sent a request's head to `path` and part of its body, and stalls.
async fn stalled(served: &Served, path: &str) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(served.address).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = served.connector.connect(name, tcp).await.unwrap();
    let head =
        format!("POST {path} HTTP/1.1\r\nHost: webhook\r\nContent-Length: 1000\r\n\r\n{{\"kind\":");
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    tls
}

fn review() -> Vec<u8> {
    uid_first(&apiserver_review(&a_pod(), false))
}

/// POST `path`: asserts the 200; the response part.
async fn check_at(served: &Served, path: &str, body: &[u8]) -> Value {
    let (status, body, _) = call(served, "POST", path, body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let review: Value = serde_json::from_slice(&body).unwrap();
    review["response"].clone()
}

/// The host with a slow planner on `/slow` (answering `undecided` when it cannot decide) and
/// [`AppLabel`] on `/check`, deadline 300 ms; the switch that makes `/slow` slow (2 s a plan).
async fn slow_and_quick(undecided: Undecided) -> (Served, Arc<AtomicBool>) {
    let slow = Arc::new(AtomicBool::new(true));
    let planner = Slow {
        slow: Arc::clone(&slow),
        delay: Duration::from_secs(2),
    };
    let served = serve_routes(
        Duration::from_millis(300),
        vec![
            Route::new("/slow", planner).when_undecided(undecided),
            Route::new("/check", AppLabel),
        ],
    )
    .await;
    (served, slow)
}

/// Takes every place of `/slow`: that many requests whose plans outlive their deadline (each
/// place is held until its plan ends, 2 s).
async fn fill_slow_places(served: &Served) {
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..MAX_IN_FLIGHT {
        let (address, connector) = (served.address, served.connector.clone());
        requests.spawn(async move {
            let tcp = TcpStream::connect(address).await.unwrap();
            let name = ServerName::try_from("127.0.0.1").unwrap();
            let mut tls = connector.connect(name, tcp).await.unwrap();
            let body = review();
            let head = format!(
                "POST /slow HTTP/1.1\r\nHost: webhook\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                body.len()
            );
            tls.write_all(head.as_bytes()).await.unwrap();
            tls.write_all(&body).await.unwrap();
            let mut answer = Vec::new();
            tls.read_to_end(&mut answer).await.unwrap();
        });
    }
    // Each is answered at its deadline, its place still held by its plan.
    requests.join_all().await;
}

#[tokio::test]
async fn slow_bodies_take_no_place_so_a_review_alongside_them_gets_its_planners_answer() {
    let served = serve_with(Duration::from_secs(5)).await;
    let mut held = Vec::new();
    for _ in 0..8 * MAX_IN_FLIGHT {
        held.push(stalled(&served, "/check").await);
    }
    let response = check(&served, &review()).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["uid"], UID);
    assert_eq!(count(&served, "allowed", "Labelled").await, 1);
    assert_eq!(count(&served, "denied", "Busy").await, 0);
    drop(held);
    served.handle.stop(true).await;
}

#[tokio::test]
async fn a_route_whose_places_are_all_taken_does_not_slow_another_route() {
    let (served, _slow) = slow_and_quick(Undecided::Deny).await;
    fill_slow_places(&served).await;
    let response = check_at(&served, "/check", &review()).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(count(&served, "denied", "Busy").await, 0);
    served.handle.stop(true).await;
}

#[tokio::test]
async fn a_denying_route_answers_busy_with_a_retriable_429_and_the_uid() {
    let (served, slow) = slow_and_quick(Undecided::Deny).await;
    fill_slow_places(&served).await;
    let response = check_at(&served, "/slow", &review()).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 429, "{response}");
    assert_eq!(response["status"]["reason"], "TooManyRequests");
    assert_eq!(
        response["uid"], UID,
        "the apiserver passes on only an answer to its request"
    );
    assert!(
        message(&response).contains("4 admission requests for /slow already: retry"),
        "{response}"
    );
    assert_eq!(count(&served, "denied", "Busy").await, 1);
    // The places come back as the slow plans end.
    slow.store(false, Ordering::SeqCst);
    let start = std::time::Instant::now();
    loop {
        let response = check_at(&served, "/slow", &review()).await;
        if response["allowed"] == true {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{response}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    served.handle.stop(true).await;
}

#[tokio::test]
async fn a_route_safe_undecided_admits_busy_late_and_slow_bodied_requests_unchanged_with_a_warning()
{
    let (served, _slow) = slow_and_quick(Undecided::AdmitUnchanged).await;
    let unchanged = |response: &Value, says: &str| {
        assert_eq!(response["allowed"], true, "{response}");
        assert_eq!(response["uid"], UID, "{response}");
        assert!(response.get("patch").is_none(), "{response}");
        assert!(response.get("status").is_none(), "{response}");
        let warning = response["warnings"][0].as_str().unwrap_or_default();
        assert!(warning.contains(says), "{response}");
        assert!(warning.ends_with("admitted unchanged"), "{response}");
    };

    // Busy: every place taken.
    fill_slow_places(&served).await;
    let response = check_at(&served, "/slow", &review()).await;
    unchanged(&response, "4 admission requests for /slow already");
    assert_eq!(count(&served, "skipped", "Busy").await, 1);

    // Late: the plan outlives the deadline (on a host of its own, its places all free).
    let (late, _slow) = slow_and_quick(Undecided::AdmitUnchanged).await;
    let response = check_at(&late, "/slow", &review()).await;
    unchanged(&response, "failed to decide within its deadline of 300ms");
    assert_eq!(count(&late, "skipped", "Timeout").await, 1);
    late.handle.stop(true).await;

    // A body that stops half way: its uid is in what arrived.
    let late_before = count(&served, "skipped", "Timeout").await;
    let body = review();
    let tcp = TcpStream::connect(served.address).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = served.connector.connect(name, tcp).await.unwrap();
    let head = format!(
        "POST /slow HTTP/1.1\r\nHost: webhook\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body[..body.len() / 2]).await.unwrap();
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer).await.unwrap();
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let review: Value = serde_json::from_slice(&answer[split + 4..]).unwrap();
    unchanged(
        &review["response"],
        "the request body did not arrive within ocifit's deadline of 300ms",
    );
    assert_eq!(count(&served, "skipped", "Timeout").await, late_before + 1);
    served.handle.stop(true).await;
}

#[tokio::test]
async fn bodies_past_the_memory_for_them_wait_and_are_answered_busy_not_held() {
    let served = serve_with(Duration::from_secs(10)).await;
    // Bodies of 3 MiB, all but their last byte sent, until the room for bodies is full: from as
    // many loopback addresses as it takes shares to fill it (127.0.0.2, .3, …), none of them the
    // address the review below comes from.
    let nearly = MAX_BODY_BYTES - 1;
    let per_address = peers::PEER_SHARE / MAX_BODY_BYTES;
    let mut held = Vec::new();
    for i in 0..MAX_BODY_MEMORY / MAX_BODY_BYTES {
        let source = std::net::Ipv4Addr::new(127, 0, 0, 2 + u8::try_from(i / per_address).unwrap());
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((source, 0).into()).unwrap();
        let tcp = socket.connect(served.address).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = served.connector.connect(name, tcp).await.unwrap();
        let head = format!(
            "POST /check HTTP/1.1\r\nHost: webhook\r\nContent-Length: {MAX_BODY_BYTES}\r\n\r\n"
        );
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.write_all(&vec![b' '; nearly]).await.unwrap();
        tls.flush().await.unwrap();
        held.push(tls);
    }
    // A flush means the bytes left this client, not that the host has read and charged them.
    held_body_bytes_reach(&served, MAX_BODY_MEMORY).await;
    let response = check(&served, &review()).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 429, "{response}");
    assert_eq!(response["uid"], UID);
    assert!(
        message(&response).contains("or 48 MiB from all, already: retry"),
        "{response}"
    );
    assert_eq!(count(&served, "denied", "Busy").await, 1);
    drop(held);
    // Bodies whose clients went away give their room back.
    held_body_bytes_reach(&served, 0).await;
    served.handle.stop(true).await;
}

/// Waits until the host's bodies hold `bytes`, as its metric shows (each step of reading
/// charges it), failing after a bound that only a host that never gets there can hit.
async fn held_body_bytes_reach(served: &Served, bytes: usize) {
    let series = format!("ocifit_admission_body_bytes {bytes}");
    let held = || {
        let text = served.metrics.encode().unwrap();
        text.lines().any(|line| line == series)
    };
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        while !held() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the host never held {bytes} bytes of bodies:\n{}",
        served.metrics.encode().unwrap()
    );
}

#[tokio::test]
async fn a_planner_slower_than_the_deadline_is_answered_at_the_deadline_and_the_next_request_normally()
 {
    let slow = Arc::new(AtomicBool::new(true));
    let planner = Slow {
        slow: Arc::clone(&slow),
        delay: Duration::from_secs(2),
    };
    let served = serve_routes(
        Duration::from_millis(300),
        vec![Route::new("/check", planner)],
    )
    .await;
    let started = std::time::Instant::now();
    let response = check(&served, &review()).await;
    let took = started.elapsed();
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("failed to decide within its deadline of 300ms"),
        "{response}"
    );
    assert_eq!(response["uid"], UID);
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(count(&served, "denied", "Timeout").await, 1);
    slow.store(false, Ordering::SeqCst);
    let response = check(&served, &review()).await;
    assert_eq!(response["allowed"], true, "{response}");
    served.handle.stop(true).await;
}

#[tokio::test]
async fn a_draining_host_closes_each_connection_after_its_answer_and_keeps_it_otherwise() {
    let served = serve().await;
    let body = review();
    let head = format!(
        "POST /check HTTP/1.1\r\nHost: webhook\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    // Two requests on one kept-alive connection; the first answer says whether it stays.
    let exchange = || async {
        let tcp = TcpStream::connect(served.address).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = served.connector.connect(name, tcp).await.unwrap();
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.write_all(&body).await.unwrap();
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        // Until the whole first answer is in (its body ends the review).
        while !answer.ends_with(b"}}") {
            let read = tls.read(&mut buffer).await.unwrap();
            assert!(read > 0, "closed before the answer");
            answer.extend_from_slice(&buffer[..read]);
        }
        let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        // Then what the connection does next: closed (0) or answering a second request.
        let _ = tls.write_all(head.as_bytes()).await;
        let _ = tls.write_all(&body).await;
        let next = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buffer))
            .await
            .expect("the connection neither answered nor closed");
        (text, next.unwrap_or(0))
    };
    let (kept, next) = exchange().await;
    assert!(!kept.contains("connection: close"), "{kept}");
    assert!(next > 0, "an idle connection is kept alive");

    served.draining.store(true, Ordering::Relaxed);
    let (closing, next) = exchange().await;
    assert!(closing.contains("connection: close"), "{closing}");
    assert_eq!(next, 0, "the connection is closed after the answer");
    served.handle.stop(true).await;
}

#[tokio::test]
async fn a_small_request_a_planner_bounds_plans_on_the_connections_worker_and_any_other_off_it() {
    let (bounded, pooled) = (Arc::default(), Arc::default());
    let served = serve_routes(
        DEADLINE,
        vec![
            Route::new("/bounded", Whereabouts::<true>(Arc::clone(&bounded))),
            Route::new("/pooled", Whereabouts::<false>(Arc::clone(&pooled))),
        ],
    )
    .await;
    for path in ["/bounded", "/pooled"] {
        let response = check_at(&served, path, &review()).await;
        assert_eq!(response["allowed"], true, "{response}");
        assert_eq!(response["uid"], UID, "{response}");
    }
    let on = |planned: &Arc<std::sync::Mutex<Vec<String>>>| planned.lock().unwrap().clone();
    // actix names the threads that serve connections so.
    let worker = |thread: &String| thread.starts_with("actix-server worker");
    let (planned, pooled) = (on(&bounded), on(&pooled));
    assert!(planned.len() == 1 && worker(&planned[0]), "{planned:?}");
    assert!(pooled.len() == 1 && !worker(&pooled[0]), "{pooled:?}");
    // A body the caps allow but no real pod comes near would hold the worker (and its other
    // connections) for its whole parse: planned off it, bounded or not.
    let mut large = a_pod();
    large.metadata.annotations = Some(std::collections::BTreeMap::from([(
        "example.com/padding".to_owned(),
        "x".repeat(128 * 1024),
    )]));
    let response = check_at(
        &served,
        "/bounded",
        &uid_first(&apiserver_review(&large, false)),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    let planned = on(&bounded);
    assert!(planned.len() == 2 && !worker(&planned[1]), "{planned:?}");
    served.handle.stop(true).await;
}

#[tokio::test]
async fn a_bounded_planner_that_must_wait_is_planned_on_the_pool_and_answered_once() {
    let planned = Arc::new(std::sync::Mutex::new(Vec::new()));
    let served = serve_routes(
        DEADLINE,
        vec![Route::new("/waits", MustWait(Arc::clone(&planned)))],
    )
    .await;
    let response = check_at(&served, "/waits", &review()).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["uid"], UID, "{response}");
    let planned = planned.lock().unwrap().clone();
    assert!(
        planned.len() == 1 && !planned[0].starts_with("actix-server worker"),
        "{planned:?}"
    );
    served.handle.stop(true).await;
}

#[tokio::test]
async fn a_planner_that_panics_on_the_connections_worker_is_answered_as_failed_and_the_host_serves_on()
 {
    let served = serve_routes(
        DEADLINE,
        vec![
            Route::new("/panics", Panics).when_undecided(Undecided::AdmitUnchanged),
            Route::new("/check", AppLabel),
        ],
    )
    .await;
    let response = check_at(&served, "/panics", &review()).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["uid"], UID, "{response}");
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("its planner panicked"), "{response}");
    assert_eq!(count(&served, "skipped", "Timeout").await, 1);
    let response = check(&served, &review()).await;
    assert_eq!(response["allowed"], true, "{response}");
    served.handle.stop(true).await;
}
