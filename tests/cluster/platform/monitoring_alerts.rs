//! The chart's alerting rules and dashboard against a real Prometheus (built from the Prometheus
//! module like the other test tools) scraping `ocifit run` every second: while the registry is
//! stopped, an ImageSelectionPolicy serves its last known good artifact and a gated pod waits past
//! its PlacementPolicy's bound, and `OcifitImageSelectionPolicyDegraded` and
//! `OcifitPodsGatedTooLong` fire; once the registry returns, both resolve. Every query of the
//! dashboard returns series (but the workflow steps', as no step runs here: the artifact cache's
//! workflow test reads those). Prometheus scrapes the OpenMetrics `ocifit run` serves without an
//! error, and its Prometheus text form passes `promtool check metrics`. The rules are the chart's
//! rendered ConfigMap; the only test-time parameter is a 2 s `for:` on the two alerts under test
//! (theirs are 30 and 5 minutes).

#![allow(clippy::unwrap_used)] // the steps outside #[test] fns fail the test loudly, as the test does

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit_testkit::chart::find;
use ocifit_testkit::{Proxy, Tool, create_namespace};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::support::objects::{Policy, linux_node};
use crate::support::placement::{self, create_policy, gates, wait_pod};
use crate::support::prometheus::{Prometheus, chart_documents, chart_rules};
use crate::support::{Env, get, is};

const NAMESPACE: &str = "monitoring";
/// The alerts this scenario makes fire, with the `for:` it gives them.
const UNDER_TEST: [&str; 2] = [
    "OcifitImageSelectionPolicyDegraded",
    "OcifitPodsGatedTooLong",
];
const SHORT_FOR: &str = "2s";
const WAIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_registry_outage_fires_the_degraded_and_gated_too_long_alerts_until_it_ends() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    create_namespace(&client, NAMESPACE).await.unwrap();
    let registry = env.registry();
    // ocifit reaches the registry only through a proxy that can be switched off.
    let mut proxy = Proxy::start(registry.addr()).await.expect("the proxy");
    registry
        .push_image("library/app", "v1", "linux/amd64")
        .await
        .unwrap();
    for repository in ["shop/web", "shop/api"] {
        registry
            .push_multi_platform(repository, "v1", &["linux/amd64", "linux/arm64"])
            .await
            .unwrap();
    }
    let app = format!("{}/library/app:v1", proxy.addr);
    env.push_artifact(
        "ocifit/app:v1",
        &format!(
            r#"{{"version":"v1alpha1","compatibilities":[{{"tag":"{app}","weight":1,"description":"app","rules":[]}}]}}"#
        ),
    )
    .await;
    env.add_node(linux_node("amd")).await;
    let served = placement::serve(
        &env,
        "monitoring",
        &[
            "--plain-http-registry",
            &proxy.addr,
            "--max-retry-interval",
            "2s",
        ],
    )
    .await;
    env.create_policy(
        &Policy::on_artifact("app", &format!("{}/ocifit/app:v1", proxy.addr))
            .refresh_interval("10s"),
    )
    .await;
    env.wait_status("app", WAIT, "Ready", |s| is(s, "Ready", "True", "Resolved"))
        .await;
    // Pods may wait 3 s for inspection; 100 failed attempts take far longer, so one stays gated.
    create_policy(
        &client,
        "shop",
        json!({"onInspectionFailure": {"attempts": 100, "timeout": "3s"}}),
    )
    .await;
    let web = format!("{}/shop/web:v1", proxy.addr);
    served
        .gate(&client, "ocifit-placement", NAMESPACE, &web)
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    // Left unchanged at admission: a series for the dashboard's refusals panel.
    pods.create(
        &PostParams::default(),
        &placement::pod(
            "excluded",
            NAMESPACE,
            json!({"placement.ocifit.io/enabled": "false"}),
            &[("web", &web)],
        ),
    )
    .await
    .unwrap();

    let (rules, dashboard) = chart_monitoring().await;
    let prometheus = Prometheus::start(&env, &served.controller.admin, &rules).await;
    prometheus
        .wait_for("ocifit scraped", |p| async move {
            p.series("up{job=\"ocifit-metrics\"} == 1").await > 0
        })
        .await;
    assert!(
        prometheus.firing().await.is_empty(),
        "nothing fires before the outage"
    );
    prometheus.scraped_without_error().await;
    promtool_check_metrics(&env, &served.controller.admin).await;
    let mut answered: BTreeSet<String> = BTreeSet::new();

    proxy.down().await;
    let outage = Instant::now();
    // Never inspected before: the outage is what it meets.
    let api = format!("{}/shop/api:v1", proxy.addr);
    pods.create(
        &PostParams::default(),
        &placement::pod("waiting", NAMESPACE, json!({}), &[("api", &api)]),
    )
    .await
    .unwrap();
    let fired = prometheus
        .wait_for("both alerts firing", |p| async move {
            let firing = p.firing().await;
            UNDER_TEST
                .iter()
                .all(|alert| firing.iter().any(|f| f.name == *alert))
        })
        .await;
    eprintln!(
        "MEASURE both alerts firing {:?} after the registry stopped",
        fired - outage
    );
    let gated = prometheus.fired("OcifitPodsGatedTooLong").await;
    assert_eq!(
        gated.as_ref().map(|f| f.label("policy")),
        Some("shop"),
        "the alert names the policy: {gated:?}"
    );
    assert!(
        gates(&pods.get("waiting").await.unwrap()).len() == 1,
        "still gated"
    );
    assert!(
        prometheus
            .series(
                "ocifit_placement_inspection_failures_total{kind=~\"transport|backing_off\"} > 0"
            )
            .await
            > 0,
        "the failed inspections are counted by kind"
    );
    answered.extend(prometheus.answering(&dashboard).await);

    proxy.up().await.expect("the proxy up again");
    let back = Instant::now();
    wait_pod(&pods, "waiting", "released", |pod| gates(pod).is_empty()).await;
    let resolved = prometheus
        .wait_for("both alerts resolved", |p| async move {
            let firing = p.firing().await;
            !UNDER_TEST
                .iter()
                .any(|alert| firing.iter().any(|f| f.name == *alert))
        })
        .await;
    eprintln!(
        "MEASURE both alerts resolved {:?} after the registry returned",
        resolved - back
    );
    env.wait_status("app", WAIT, "current again", |s| {
        is(s, "Degraded", "False", "Current")
    })
    .await;

    // Counters that moved only since the outage (releases) need a few scrapes for their rate.
    let answered = &mut answered;
    let dashboard = &dashboard;
    let deadline = Instant::now() + WAIT;
    loop {
        answered.extend(prometheus.answering(dashboard).await);
        let silent: Vec<&String> = dashboard
            .iter()
            .filter(|q| !answered.contains(*q))
            .collect();
        if silent.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "dashboard queries without series: {silent:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The chart's rules (with `monitoring.enabled`) with [`SHORT_FOR`] on the alerts under test, as
/// a rule file; and every query of its dashboard.
async fn chart_monitoring() -> (String, Vec<String>) {
    let docs = chart_documents().await;
    let rules = chart_rules(&docs, &UNDER_TEST, SHORT_FOR);
    let dashboard = find(&docs, "ConfigMap", "ocifit-dashboard").unwrap()["data"]["ocifit.json"]
        .as_str()
        .unwrap();
    let dashboard: Value = serde_json::from_str(dashboard).unwrap();
    let queries = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().unwrap())
        .map(|target| target["expr"].as_str().unwrap())
        .filter(|expr| !expr.contains("ocifit_artifact_step"))
        // Grafana's "All" for the variables; a rate over 10 scrapes.
        .map(|expr| ocifit_testkit::chart::grafana_query(expr, "10s"))
        .collect();
    (rules, queries)
}

/// `ocifit run`'s `/metrics` as `curl` gets it (the Prometheus text format) passes `promtool
/// check metrics`: every series a running process serves follows Prometheus's naming rules.
async fn promtool_check_metrics(env: &Env, admin: &str) {
    let (code, body) = get(admin, "/metrics").await.unwrap();
    assert_eq!(code, 200);
    let promtool = env.cluster.tools().path(Tool::Promtool).unwrap();
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, body.as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
