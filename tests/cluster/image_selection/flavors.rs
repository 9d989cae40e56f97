//! The seed's flavor example end to end on a real cluster and registry: three labelled nodes give
//! three classes with debian, ubuntu and rockylinux; the status follows relabels, new kinds of
//! node and deleted nodes; a label the artifact does not read changes nothing; a burst of
//! relabels coalesces; SIGTERM exits 0. One scenario, in named steps, each continuing from the
//! cluster the previous one left.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kube::api::{WatchEvent, WatchParams};
use ocifit::api::ImageSelectionPolicy;

use crate::support::objects::linux_node;
use crate::support::{Controller, Env, FLAVOR, images, is};

const POLICY: &str = "flavors";

/// The three flavor images: debian (vanilla), ubuntu (chocolate), rockylinux (strawberry).
struct Flavors {
    debian: String,
    ubuntu: String,
    rocky: String,
}

#[tokio::test]
async fn flavor_policy_follows_the_nodes() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let [debian, ubuntu, rocky] = env.push_flavors().await;
    let flavors = Flavors {
        debian,
        ubuntu,
        rocky,
    };
    for flavor in ["vanilla", "chocolate", "strawberry"] {
        env.add_node(linux_node(&format!("{flavor}-1")).label(FLAVOR, flavor))
            .await;
    }
    env.add_node(
        linux_node("control-plane")
            .label(FLAVOR, "vanilla")
            .label("node-role.kubernetes.io/control-plane", ""),
    )
    .await;
    let controller = Controller::start(&env, "flavors-a", &[]).await;

    three_flavors_give_three_classes_and_kubectl_prints_them(&env, &flavors).await;
    a_relabelled_node_moves_to_its_new_class(&env, &flavors).await;
    let writes = controller.metric("ocifit_status_writes_total").await;
    let unlabelled = a_label_no_rule_reads(&env).await;
    a_new_kind_of_node_is_a_new_row_and_goes_with_its_node(&env, &flavors).await;
    the_label_no_rule_reads_changed_nothing(&env, &unlabelled).await;
    a_burst_of_relabels_coalesces_into_a_handful_of_reconciles(&env, &controller, &flavors).await;
    assert!(controller.metric("ocifit_status_writes_total").await > writes);
    env.wait_event(POLICY, "Normal", "Resolved").await;
    a_second_policy_resolves_once_the_controller_runs(&env).await;

    let exit = controller.stop().await;
    assert!(
        exit.success(),
        "ocifit run must exit 0 on SIGTERM: {exit:?}"
    );
}

async fn three_flavors_give_three_classes_and_kubectl_prints_them(env: &Env, flavors: &Flavors) {
    let Flavors {
        debian,
        ubuntu,
        rocky,
    } = flavors;
    let applied = Instant::now();
    env.create_policy(&env.flavor_policy(POLICY)).await;
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
}

/// Answered by the node watch long before the next refresh (default 10m). Speed is reported
/// (MEASURE), not asserted.
async fn a_relabelled_node_moves_to_its_new_class(env: &Env, flavors: &Flavors) {
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
        .find(|c| c.image.as_deref() == Some(flavors.debian.as_str()))
        .expect("the vanilla class");
    assert_eq!(vanilla.nodes, 2);
}

/// Labels a node with a key no rule reads; returns the policy as it was before.
async fn a_label_no_rule_reads(env: &Env) -> ImageSelectionPolicy {
    let before = env.policies().get(POLICY).await.expect("the policy");
    env.label_node("vanilla-1", "team", "storage").await;
    before
}

/// Nothing a user sees changed for the unread label. Read without a clock: the policy's history
/// from `before` up to the status with the arm64 row. The node watch hands the controller the
/// label before the arm64 node, and a policy's reconciles run one at a time, so a write the label
/// caused comes before that status, or is folded into it.
async fn the_label_no_rule_reads_changed_nothing(env: &Env, before: &ImageSelectionPolicy) {
    let from = before.metadata.resource_version.clone().unwrap_or_default();
    let params = WatchParams::default()
        .fields(&format!("metadata.name={POLICY}"))
        .timeout(30);
    let mut history = Box::pin(
        env.policies()
            .watch(&params, &from)
            .await
            .expect("watch the policy"),
    );
    let status = |p: &ImageSelectionPolicy| p.status.clone().expect("a status");
    let old = status(before);
    let arm = |p: &ImageSelectionPolicy| {
        status(p)
            .classes
            .iter()
            .any(|c| c.labels.get("kubernetes.io/arch").map(String::as_str) == Some("arm64"))
    };
    let barrier = loop {
        match history.next().await {
            Some(Ok(WatchEvent::Modified(policy))) if arm(&policy) => break status(&policy),
            Some(Ok(WatchEvent::Modified(policy))) => panic!(
                "an unread label changed the status: before {old:?}, after {:?}",
                policy.status
            ),
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            other => panic!("the policy's history ended before the arm64 row: {other:?}"),
        }
    };
    assert_eq!(barrier.class_keys, old.class_keys, "the label is not read");
    for class in &old.classes {
        assert!(
            barrier.classes.contains(class),
            "{class:?} changed with an unread label: {:?}",
            barrier.classes
        );
    }
}

/// An arm64 chocolate node is a new row, served by the arm64 image; deleting it removes the row.
async fn a_new_kind_of_node_is_a_new_row_and_goes_with_its_node(env: &Env, flavors: &Flavors) {
    env.add_node(
        linux_node("chocolate-arm")
            .label(FLAVOR, "chocolate")
            .label("kubernetes.io/arch", "arm64"),
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
    assert_eq!(arm.image.as_deref(), Some(flavors.ubuntu.as_str()));

    env.delete_node("chocolate-arm").await;
    env.wait_status(POLICY, Duration::from_secs(10), "the arm64 row gone", |s| {
        s.class_count == 2
    })
    .await;
}

async fn a_burst_of_relabels_coalesces_into_a_handful_of_reconciles(
    env: &Env,
    controller: &Controller,
    flavors: &Flavors,
) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = controller
        .metric("ocifit_reconciles_total{controller=\"image_selection\",result=\"ok\"}")
        .await;
    let flavor_names = ["vanilla", "chocolate"];
    for i in 0..1000 {
        env.label_node("chocolate-1", FLAVOR, flavor_names[i % 2])
            .await;
    }
    env.wait_status(
        POLICY,
        Duration::from_secs(10),
        "chocolate-1 chocolate again",
        |s| {
            s.classes
                .iter()
                .any(|c| c.image.as_deref() == Some(flavors.ubuntu.as_str()) && c.nodes == 1)
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let burst = controller
        .metric("ocifit_reconciles_total{controller=\"image_selection\",result=\"ok\"}")
        .await
        - before;
    eprintln!("MEASURE reconciles for 1000 relabels: {burst}");
    assert!(
        burst <= 10.0,
        "{burst} reconciles for a burst of 1000 relabels"
    );
}

/// Apply to Ready in steady state (the first policy also waits for the apiserver's first watch of
/// a new CRD).
async fn a_second_policy_resolves_once_the_controller_runs(env: &Env) {
    let applied = Instant::now();
    env.create_policy(&env.flavor_policy("flavors-again")).await;
    env.wait_status("flavors-again", Duration::from_secs(10), "Ready", |s| {
        is(s, "Ready", "True", "Resolved")
    })
    .await;
    eprintln!(
        "MEASURE second policy apply to Ready: {:?}",
        applied.elapsed()
    );
}
