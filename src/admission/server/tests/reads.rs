//! Requests that wait on the apiserver (a planner that must read a namespace or a cache its
//! store does not hold) take none of their route's places: reviews naming namespaces that do
//! not exist, which anyone who reaches the port can send, leave the places to real reviews.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::admission::route::Undecided;

/// A gate that decides a pod of a stored namespace at once, and reads (here: sleeps 1.5 s) for
/// a pod of any other; counts the reads started.
struct Gate(Arc<AtomicUsize>);

const STORED: &str = "default";

impl Planner for Gate {
    type Object = Pod;
    type Plan = Judged;

    const BOUNDED: bool = true;

    fn plan(&self, request: &Request<Pod>) -> Judged {
        if request.namespace.as_deref() != Some(STORED) {
            self.0.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(1500));
        }
        Judged(true)
    }

    fn plan_now(&self, request: &Request<Pod>) -> Option<Judged> {
        (request.namespace.as_deref() == Some(STORED)).then_some(Judged(true))
    }
}

/// A review of a pod in `namespace`.
fn in_namespace(namespace: &str) -> Vec<u8> {
    let mut review = apiserver_review(&a_pod(), false);
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    uid_first(&review)
}

/// POSTs `body` to `/gate` on a connection of its own, closed after the answer.
async fn post(address: SocketAddr, connector: TlsConnector, body: Vec<u8>) {
    let tcp = TcpStream::connect(address).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let head = format!(
        "POST /gate HTTP/1.1\r\nHost: webhook\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body).await.unwrap();
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer).await.unwrap();
}

#[tokio::test]
async fn reviews_waiting_on_the_apiserver_leave_the_routes_places_to_real_reviews() {
    let reads = Arc::new(AtomicUsize::new(0));
    let served = serve_routes(
        Duration::from_secs(2),
        vec![
            Route::new("/gate", Gate(Arc::clone(&reads))).when_undecided(Undecided::AdmitUnchanged),
        ],
    )
    .await;
    let mut forged = tokio::task::JoinSet::new();
    for i in 0..2 * MAX_IN_FLIGHT {
        let body = in_namespace(&format!("ghost-{i}"));
        forged.spawn(post(served.address, served.connector.clone(), body));
    }
    // Wait until as many forged reviews are reading as there are places for them.
    let started = std::time::Instant::now();
    while reads.load(Ordering::SeqCst) < MAX_WAITING.min(MAX_IN_FLIGHT) {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the forged reviews never read"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let response = check_at_path(&served, "/gate", &in_namespace(STORED)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(
        response["warnings"].is_null(),
        "the real review was not decided by its planner: {response}"
    );
    forged.join_all().await;
    served.handle.stop(true).await;
}

/// POST `path`: asserts the 200; the response part.
async fn check_at_path(served: &Served, path: &str, body: &[u8]) -> Value {
    let (status, body, _) = call(served, "POST", path, body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let review: Value = serde_json::from_slice(&body).unwrap();
    review["response"].clone()
}
