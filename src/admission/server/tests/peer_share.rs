//! Each peer address holds at most its share of the memory for bodies: connections from one
//! address that send all but the last byte of 3 MiB bodies and stall fill their own share, and a
//! review from another address (the apiserver's) finds room.

use super::*;

/// Large bodies from one address, at most: 72 MiB, more than the host's whole room.
const STALLED: usize = 24;
/// What each declares, and sends of it: all but a byte, so each holds all it declared (its
/// buffer grows to the declared length once past it by half).
const DECLARED: usize = 3 * 1024 * 1024;
const SENT: usize = DECLARED - 1;
/// How the body starts (the uid where the apiserver writes it); the rest is padding.
const START: &str = r#"{"request":{"uid":"stalled","pad":""#;

/// A connection from `source` that sends [`SENT`] bytes of its [`DECLARED`] body to `/check`
/// and stalls, held until the task is aborted.
async fn stall_from(source: &str, address: SocketAddr, connector: TlsConnector) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let tcp = socket.connect(address).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let head = format!(
        "POST /check HTTP/1.1\r\nHost: webhook\r\nContent-Length: {DECLARED}\r\n\r\n{START}"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    // The host stops reading a body it has no room for: what is left waits in the network.
    let _ = tls.write_all(&vec![b'x'; SENT - START.len()]).await;
    let _ = tls.flush().await;
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn large_stalled_bodies_from_one_address_leave_room_for_another() {
    let served = serve_with(Duration::from_secs(30)).await;
    let mut stalled = tokio::task::JoinSet::new();
    // One after the other, each holding its whole body's room before the next, until one finds
    // no room and is answered busy: the bodies from 127.0.0.2 hold all they may.
    'flood: for _ in 0..STALLED {
        let (held_before, busy_before) = (held(&served), count(&served, "denied", "Busy").await);
        stalled.spawn(stall_from(
            "127.0.0.2",
            served.address,
            served.connector.clone(),
        ));
        let started = std::time::Instant::now();
        while held(&served) < held_before + DECLARED as i64 {
            if count(&served, "denied", "Busy").await > busy_before {
                break 'flood;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "a stalled body neither took its room nor was answered busy"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert!(
        count(&served, "denied", "Busy").await > 0,
        "{STALLED} stalled bodies all found room"
    );
    let response = check(&served, &review_of_a_labelled_pod()).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["uid"], UID);
    stalled.abort_all();
    served.handle.stop(true).await;
}

/// The bytes of bodies the host holds now.
fn held(served: &Served) -> i64 {
    let text = served.metrics.encode().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("ocifit_admission_body_bytes "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn review_of_a_labelled_pod() -> Vec<u8> {
    uid_first(&apiserver_review(&a_pod(), false))
}
