//! Two `ocifit run` processes: one leader writes, the other only keeps its caches; on SIGTERM the
//! leader releases its Lease and the other, watching the Lease, takes over at once; when a leader dies without
//! releasing (SIGKILL), the other takes over after the lease expires. No replica writes while it
//! does not lead.

use std::time::{Duration, Instant};

use crate::support::objects::linux_node;
use crate::support::{Controller, Env, FLAVOR};

const LEASE: [&str; 4] = ["--lease-duration", "4s", "--lease-grace", "1s"];

async fn leading(controller: &Controller) -> bool {
    controller.metric("ocifit_leader").await == 1.0
}

async fn wait_leading(controller: &Controller, timeout: Duration) -> Duration {
    let start = Instant::now();
    while !leading(controller).await {
        assert!(
            start.elapsed() < timeout,
            "no takeover within {timeout:?}; log:\n{}",
            controller.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

#[tokio::test]
async fn one_leader_writes_and_hands_over() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    env.push_flavors().await;
    env.add_node(linux_node("n-1").label(FLAVOR, "vanilla"))
        .await;
    env.add_node(linux_node("n-2").label(FLAVOR, "chocolate"))
        .await;
    let a = Controller::start(&env, "replica-a", &LEASE).await;
    wait_leading(&a, Duration::from_secs(10)).await;
    let b = Controller::start(&env, "replica-b", &LEASE).await;
    assert!(!leading(&b).await, "two leaders");

    the_leader_writes_and_the_follower_only_counts_not_leader(&env, &a, &b).await;
    on_sigterm_the_lease_is_released_and_the_follower_takes_over_at_once(&env, a, &b).await;
    a_killed_leader_is_replaced_once_its_lease_expires(&env, b).await;
}

async fn the_leader_writes_and_the_follower_only_counts_not_leader(
    env: &Env,
    a: &Controller,
    b: &Controller,
) {
    env.create_policy(&env.flavor_policy("flavors")).await;
    env.wait_ready("flavors").await;
    env.label_node("n-2", FLAVOR, "strawberry").await;
    env.wait_status("flavors", Duration::from_secs(10), "relabel", |s| {
        s.classes
            .iter()
            .any(|c| c.labels.get(FLAVOR).map(String::as_str) == Some("strawberry"))
    })
    .await;
    a.wait_metric_above("ocifit_status_writes_total", 1.0, Duration::from_secs(5))
        .await;
    assert_eq!(
        b.metric("ocifit_status_writes_total").await,
        0.0,
        "the follower wrote"
    );
    assert!(
        b.metric("ocifit_reconciles_total{controller=\"image_selection\",result=\"not_leader\"}")
            .await
            >= 1.0
    );
    assert_eq!(
        b.metric("ocifit_reconciles_total{controller=\"image_selection\",result=\"ok\"}")
            .await,
        0.0
    );
}

async fn on_sigterm_the_lease_is_released_and_the_follower_takes_over_at_once(
    env: &Env,
    a: Controller,
    b: &Controller,
) {
    let stopped = Instant::now();
    assert!(a.stop().await.success());
    let handover = wait_leading(b, Duration::from_secs(10)).await;
    let graceful = stopped.elapsed();
    eprintln!(
        "MEASURE handover after SIGTERM of the leader: {graceful:?} (after exit: {handover:?})"
    );
    env.label_node("n-2", FLAVOR, "vanilla").await;
    env.wait_status("flavors", Duration::from_secs(10), "one class", |s| {
        s.class_count == 1
    })
    .await;
    b.wait_metric_above("ocifit_status_writes_total", 0.0, Duration::from_secs(5))
        .await;
}

async fn a_killed_leader_is_replaced_once_its_lease_expires(env: &Env, b: Controller) {
    let a = Controller::start(env, "replica-a2", &LEASE).await;
    assert!(!leading(&a).await, "two leaders");
    let killed = Instant::now();
    b.kill().await;
    wait_leading(&a, Duration::from_secs(15)).await;
    let expiry = killed.elapsed();
    eprintln!("MEASURE handover after SIGKILL of the leader (lease 4s): {expiry:?}");
    assert!(
        expiry >= Duration::from_secs(1),
        "took over a live lease: {expiry:?}"
    );
    env.label_node("n-1", FLAVOR, "chocolate").await;
    env.wait_status(
        "flavors",
        Duration::from_secs(10),
        "two classes again",
        |s| s.class_count == 2,
    )
    .await;
    assert!(a.stop().await.success());
}
