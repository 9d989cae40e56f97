//! kube-apiserver killed with SIGKILL and started again mid-run: while it is down the webhook
//! answers reviews (sent from loopback, as the apiserver would) from its last index; once it is
//! back, a node change reaches the policy's status within 10 s; nothing panics and no burst of
//! duplicate Events follows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::hostile::{pod, post, review};
use super::{Served, flavored, second_strawberry_node};
use crate::support::FLAVOR;
use crate::support::objects::PLACEHOLDER;

/// How long the apiserver stays down: under the Lease's renewal margin (15 s less 5 s), so the
/// leader keeps leading.
const DOWN: Duration = Duration::from_secs(5);

#[tokio::test]
async fn the_webhook_answers_while_the_apiserver_is_down_and_status_converges_after() {
    let mut served = Served::start("faults-apiserver").await;
    let events_before = served.env.events("flavors").await;
    let connector = served.connector();
    let body = Arc::new(review(
        pod(json!({"nodeSelector": {FLAVOR: "vanilla"},
            "containers": [{"name": "app", "image": PLACEHOLDER}]})),
        None,
    ));

    served.env.cluster.kill_apiserver();
    let down_at = Instant::now();
    let mut answers = BTreeMap::<String, usize>::new();
    let mut slowest = Duration::ZERO;
    while down_at.elapsed() < DOWN {
        let (answer, took) = post(
            connector.clone(),
            served.webhook_address.clone(),
            Arc::clone(&body),
            false,
        )
        .await;
        slowest = slowest.max(took);
        *answers.entry(answer).or_default() += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    served
        .env
        .cluster
        .start_apiserver_again(Duration::from_secs(60))
        .await
        .expect("kube-apiserver back");
    let back_at = Instant::now();
    eprintln!(
        "FAULT apiserver-restart: down {:?}; webhook answers meanwhile {answers:?}, slowest {slowest:?}",
        down_at.elapsed()
    );
    assert_eq!(
        answers.keys().collect::<Vec<_>>(),
        ["HTTP/1.1 200 OK allowed"],
        "every review answered from the last index"
    );

    // A change once it is back.
    let (status, _) = second_strawberry_node(&served.env).await;
    let converged = back_at.elapsed();
    eprintln!(
        "FAULT apiserver-restart: status converged {converged:?} after the apiserver's return"
    );
    assert!(converged <= Duration::from_secs(10), "{converged:?}");
    assert!(!status.classes.is_empty());

    let image = served
        .create(&flavored("after-restart", "chocolate"))
        .await
        .expect("a pod admitted through the apiserver");
    assert_eq!(image, served.by_flavor["chocolate"]);
    let log = served.controller.log_text();
    assert!(!log.contains("panicked"), "{log}");
    let events_after = served.env.events("flavors").await;
    let new = events_after.len().saturating_sub(events_before.len());
    let mut seen = std::collections::BTreeSet::new();
    let duplicates = events_after.iter().filter(|e| !seen.insert(*e)).count();
    eprintln!(
        "FAULT apiserver-restart: Events {} before, {} after ({new} new, {duplicates} duplicates)",
        events_before.len(),
        events_after.len()
    );
    assert_eq!(duplicates, 0, "{events_after:?}");
    assert!(new <= 2, "a burst of Events: {events_after:?}");
}
