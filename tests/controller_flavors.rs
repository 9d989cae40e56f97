//! The seed's flavor example end to end on a real cluster and registry: three labelled nodes give
//! three classes with debian, ubuntu and rockylinux; the status follows relabels, new kinds of
//! node and deleted nodes; labels the artifact does not read reconcile nothing; a burst of
//! relabels coalesces; SIGTERM exits 0.

mod controller_support;

use std::time::{Duration, Instant};

use controller_support::{Controller, Env, FLAVOR, images, is};

const POLICY: &str = "flavors";

#[tokio::test]
async fn flavor_policy_follows_the_nodes() {
    let env = Env::start().await;
    let [debian, ubuntu, rocky] = env.push_flavors("ocifit/flavor-compat:v1").await;
    env.node("vanilla-1", &[(FLAVOR, "vanilla")]).await;
    env.node("chocolate-1", &[(FLAVOR, "chocolate")]).await;
    env.node("strawberry-1", &[(FLAVOR, "strawberry")]).await;
    env.node(
        "control-plane",
        &[
            (FLAVOR, "vanilla"),
            ("node-role.kubernetes.io/control-plane", ""),
        ],
    )
    .await;
    let controller = Controller::start(&env, "flavors-a", &[]).await;

    let applied = Instant::now();
    env.policy(POLICY, "ocifit/flavor-compat:v1", serde_json::json!({}))
        .await;
    let (status, _) = env
        .wait_status(POLICY, Duration::from_secs(30), "Ready", |s| {
            is(s, "Ready", "True", "Resolved")
        })
        .await;
    let apply_to_ready = applied.elapsed();
    eprintln!("MEASURE policy apply to Ready: {apply_to_ready:?}");
    assert_eq!(
        images(&status),
        [
            Some(debian.clone()),
            Some(rocky.clone()),
            Some(ubuntu.clone())
        ]
    );
    assert!(debian.contains("debian") && ubuntu.contains("ubuntu") && rocky.contains("rockylinux"));
    assert_eq!(status.class_count, 3);
    assert!(
        status.classes.iter().all(|c| c.nodes == 1),
        "control plane left out"
    );
    assert!(is(&status, "ArtifactResolved", "True", "Fetched"));
    assert!(is(&status, "Degraded", "False", "Current"));
    let digest = status
        .artifact
        .as_ref()
        .expect("artifact status")
        .digest
        .clone();

    let table = env.kubectl_get_isp(POLICY).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "CLASSES", "ARTIFACT", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], [POLICY, "True", "3", digest.as_str()], "{table}");

    // Relabel: the node moves to the vanilla class, answered by the node watch long before the
    // next refresh (default 10m). Speed is reported (MEASURE), not asserted.
    let relabelled = Instant::now();
    env.label_node("strawberry-1", FLAVOR, "vanilla").await;
    let (status, _) = env
        .wait_status(POLICY, Duration::from_secs(10), "two classes", |s| {
            s.class_count == 2
        })
        .await;
    let relabel_to_status = relabelled.elapsed();
    eprintln!("MEASURE node relabel to updated status: {relabel_to_status:?}");
    let vanilla = status
        .classes
        .iter()
        .find(|c| c.image.as_deref() == Some(debian.as_str()))
        .expect("the vanilla class");
    assert_eq!(vanilla.nodes, 2);

    // A label no rule reads reconciles nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reconciles = controller
        .metric("ocifit_reconciles_total{result=\"Ok\"}")
        .await;
    let writes = controller.metric("ocifit_status_writes_total").await;
    env.label_node("vanilla-1", "team", "storage").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        controller
            .metric("ocifit_reconciles_total{result=\"Ok\"}")
            .await,
        reconciles,
        "an unread label must not reconcile; log:\n{}",
        controller.log_text()
    );

    // A new kind of node (arm64 chocolate) is a new row, served by the arm64 image.
    env.node(
        "chocolate-arm",
        &[(FLAVOR, "chocolate"), ("kubernetes.io/arch", "arm64")],
    )
    .await;
    let (status, _) = env
        .wait_status(POLICY, Duration::from_secs(10), "an arm64 row", |s| {
            s.classes
                .iter()
                .any(|c| c.labels.get("kubernetes.io/arch").map(String::as_str) == Some("arm64"))
        })
        .await;
    assert_eq!(status.class_count, 3);
    let arm = status
        .classes
        .iter()
        .find(|c| c.labels["kubernetes.io/arch"] == "arm64")
        .expect("the arm64 row");
    assert_eq!(arm.image.as_deref(), Some(ubuntu.as_str()));

    // A deleted node's row goes.
    env.delete_node("chocolate-arm").await;
    env.wait_status(POLICY, Duration::from_secs(10), "the arm64 row gone", |s| {
        s.class_count == 2
    })
    .await;

    // A burst of relabels coalesces into a handful of reconciles.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = controller
        .metric("ocifit_reconciles_total{result=\"Ok\"}")
        .await;
    let flavors = ["vanilla", "chocolate"];
    for i in 0..1000 {
        env.label_node("chocolate-1", FLAVOR, flavors[i % 2]).await;
    }
    env.wait_status(
        POLICY,
        Duration::from_secs(10),
        "chocolate-1 chocolate again",
        |s| {
            s.classes
                .iter()
                .any(|c| c.image.as_deref() == Some(ubuntu.as_str()) && c.nodes == 1)
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let burst = controller
        .metric("ocifit_reconciles_total{result=\"Ok\"}")
        .await
        - before;
    eprintln!("MEASURE reconciles for 1000 relabels: {burst}");
    assert!(
        burst <= 10.0,
        "{burst} reconciles for a burst of 1000 relabels"
    );
    assert!(controller.metric("ocifit_status_writes_total").await > writes);

    env.wait_event(POLICY, "Normal", "Resolved").await;

    // A second policy once the controller runs: apply to Ready in steady state (the first one
    // also waits for the apiserver's first watch of a new CRD).
    let applied = Instant::now();
    env.policy(
        "flavors-again",
        "ocifit/flavor-compat:v1",
        serde_json::json!({}),
    )
    .await;
    env.wait_status("flavors-again", Duration::from_secs(10), "Ready", |s| {
        is(s, "Ready", "True", "Resolved")
    })
    .await;
    eprintln!(
        "MEASURE second policy apply to Ready: {:?}",
        applied.elapsed()
    );

    let exit = controller.stop().await;
    assert!(
        exit.success(),
        "ocifit run must exit 0 on SIGTERM: {exit:?}"
    );
}
