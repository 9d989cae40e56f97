//! The host's bounds over real HTTPS: requests in flight (a retriable 429 denial beyond them,
//! normal answers once they end) and the deadline over planning as well as the body.

use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

/// A planner that takes `delay` to decide while `slow` is set.
struct Slow {
    slow: Arc<AtomicBool>,
    delay: Duration,
}

impl Planner for Slow {
    type Object = Pod;
    type Plan = Judged;

    fn plan(&self, _: &AdmissionRequest<Pod>) -> Judged {
        if self.slow.load(Ordering::SeqCst) {
            std::thread::sleep(self.delay);
        }
        Judged(true)
    }
}

/// A TLS connection that sent a request's head and part of its body, and stalls.
async fn stalled(served: &Served) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(served.address).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = served.connector.connect(name, tcp).await.unwrap();
    let head = "POST /check HTTP/1.1\r\nHost: webhook\r\nContent-Length: 1000\r\n\r\n{\"kind\":";
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    tls
}

fn review() -> Vec<u8> {
    uid_first(&apiserver_review(&a_pod(), false))
}

#[tokio::test]
async fn beyond_the_requests_in_flight_a_request_is_denied_as_busy_to_retry() {
    let served = serve_with(Duration::from_secs(5)).await;
    let mut held = Vec::new();
    for _ in 0..MAX_IN_FLIGHT {
        held.push(stalled(&served).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    let response = check(&served, &review()).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 429, "{response}");
    assert_eq!(response["status"]["reason"], "TooManyRequests");
    assert_eq!(
        response["uid"], UID,
        "the apiserver passes on only an answer to its request"
    );
    assert!(
        message(&response).contains("8 admission requests already: retry"),
        "{response}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(count(&served, "denied", "Busy").await, 1);
    drop(held);
    // The places come back as the stalled requests end.
    let start = std::time::Instant::now();
    loop {
        let response = check(&served, &review()).await;
        if response["allowed"] == true {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{response}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    served.handle.stop(true).await;
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
        message(&response).contains("could not decide within its deadline of 300ms"),
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
