//! The chart's monitoring (`monitoring.enabled`): the alerting rules, rendered from their one
//! source `files/monitoring/alerts.yaml`, pass `promtool check rules` and the unit tests of
//! `tests/components/monitoring/alerts.test.yaml` (every alert fires on its failure and not
//! before its `for:`); the PrometheusRule and the ConfigMap carry the same groups; every alert
//! links its section of docs/runbooks.md; the dashboard's every query is valid PromQL, chosen by
//! its job, namespace and instance variables, over `$__rate_interval`.

use std::path::Path;

use ocifit_testkit::{Tool, Tools, repo_root};
use serde_json::Value;

use super::{documents, find, render};

const ON: &str = "monitoring.enabled=true";

/// promtool with `args` in `dir`: its output, as an error when it fails.
async fn promtool(args: &[&str], dir: &Path) -> Result<String, String> {
    let promtool = Tools::locate()
        .and_then(|tools| tools.path(Tool::Promtool))
        .map_err(|e| e.to_string())?;
    let output = tokio::process::Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .await
        .map_err(|e| e.to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// The rule file as the chart renders it into the ConfigMap with `sets`.
async fn rendered_rules(sets: &[&str]) -> String {
    let manifests = render(&[&[ON], sets].concat())
        .await
        .expect("the chart renders with monitoring");
    let docs = documents(&manifests);
    find(&docs, "ConfigMap", "ocifit-alerts")["data"]["ocifit-alerts.yaml"]
        .as_str()
        .expect("the rule file")
        .to_owned()
}

fn alerts(rules: &Value) -> Vec<&Value> {
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("rules"))
        .collect()
}

#[tokio::test]
async fn the_rendered_rules_pass_promtool_check_and_every_alerts_unit_test() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("alerts.yaml"), rendered_rules(&[]).await).unwrap();
    let tests = repo_root().join("tests/components/monitoring/alerts.test.yaml");
    std::fs::copy(&tests, dir.path().join("alerts.test.yaml")).unwrap();
    let checked = promtool(&["check", "rules", "alerts.yaml"], dir.path())
        .await
        .unwrap();
    assert!(checked.contains("SUCCESS: 14 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "alerts.test.yaml"], dir.path()).await;
    assert!(
        tested.as_ref().is_ok_and(|out| out.contains("SUCCESS")),
        "{tested:?}"
    );

    // Every alert has a unit test group of its name.
    let text = std::fs::read_to_string(&tests).unwrap();
    let rules: Value = serde_saphyr::from_str(&rendered_rules(&[]).await).unwrap();
    for alert in alerts(&rules) {
        let name = alert["alert"].as_str().unwrap();
        assert!(
            text.contains(&format!("alertname: {name}\n")),
            "{name} has no unit test"
        );
    }
}

#[tokio::test]
async fn a_rule_that_no_longer_fires_as_tested_fails_the_unit_tests() {
    let dir = tempfile::tempdir().unwrap();
    let weakened = rendered_rules(&[]).await.replacen("for: 5m", "for: 15m", 1);
    std::fs::write(dir.path().join("alerts.yaml"), weakened).unwrap();
    std::fs::copy(
        repo_root().join("tests/components/monitoring/alerts.test.yaml"),
        dir.path().join("alerts.test.yaml"),
    )
    .unwrap();
    let tested = promtool(&["test", "rules", "alerts.test.yaml"], dir.path()).await;
    let err = tested.expect_err("a longer `for:` fails its test");
    assert!(err.contains("OcifitAdmissionErrors"), "{err}");

    // An aggregation that drops the labels the runbook names fails too.
    let unlabelled = rendered_rules(&[]).await.replace(
        "max by (namespace, job, policy) (ocifit_placement_pods",
        "max by (policy) (ocifit_placement_pods",
    );
    std::fs::write(dir.path().join("alerts.yaml"), unlabelled).unwrap();
    let tested = promtool(&["test", "rules", "alerts.test.yaml"], dir.path()).await;
    let err = tested.expect_err("an alert without its namespace fails its test");
    assert!(err.contains("OcifitPodsHeld"), "{err}");
}

#[tokio::test]
async fn the_prometheus_rule_carries_the_same_groups_with_the_chart_values_filled_in() {
    let configmap: Value = serde_saphyr::from_str(
        &rendered_rules(&["placement.webhook.timeoutSeconds=1", "replicaCount=3"]).await,
    )
    .unwrap();
    let manifests = render(&[
        ON,
        "monitoring.rules.kind=PrometheusRule",
        "monitoring.labels.release=prometheus",
        "placement.webhook.timeoutSeconds=1",
        "replicaCount=3",
    ])
    .await
    .unwrap();
    let docs = documents(&manifests);
    let rule = find(&docs, "PrometheusRule", "ocifit");
    assert_eq!(rule["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(rule["spec"]["groups"], configmap["groups"]);
    let exprs: Vec<&str> = alerts(&configmap)
        .iter()
        .map(|a| a["expr"].as_str().unwrap())
        .collect();
    assert!(
        exprs.iter().any(|e| e.trim_end().ends_with("> 0.8")),
        "80% of 1 s: {exprs:?}"
    );
    assert!(
        exprs
            .iter()
            .any(|e| e.contains("< 3 or absent(up{job=\"ocifit-metrics\"} == 1)")),
        "{exprs:?}"
    );
    for placeholder in ["__JOB__", "__REPLICAS__", "__LATENCY_SECONDS__"] {
        assert!(
            !manifests.contains(placeholder),
            "{placeholder} left unfilled"
        );
    }
    // `auto` (the default) renders a PrometheusRule where the cluster serves its API.
    let chart = ocifit_testkit::chart::chart_dir();
    let detected = ocifit_testkit::chart::helm(
        &[
            "template",
            "ocifit",
            chart.to_str().expect("a UTF-8 path"),
            "--set",
            ON,
            "--api-versions",
            "monitoring.coreos.com/v1/PrometheusRule",
        ],
        None,
    )
    .await
    .expect("the chart renders");
    let detected = documents(&detected);
    assert!(
        detected.iter().any(|d| d["kind"] == "PrometheusRule")
            && !detected
                .iter()
                .any(|d| d["metadata"]["name"] == "ocifit-alerts"),
        "auto with the CRD installed"
    );
    assert!(
        documents(&render(&[]).await.unwrap())
            .iter()
            .all(|d| d["metadata"]["name"] != "ocifit-alerts" && d["kind"] != "PrometheusRule"),
        "monitoring is off by default"
    );
}

#[tokio::test]
async fn every_alert_links_its_runbook_section() {
    let runbooks = std::fs::read_to_string(repo_root().join("docs/runbooks.md")).unwrap();
    let rules: Value = serde_saphyr::from_str(&rendered_rules(&[]).await).unwrap();
    for alert in alerts(&rules) {
        let name = alert["alert"].as_str().unwrap();
        let url = alert["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url.rsplit_once('#').map(|(_, a)| a).unwrap_or_default();
        assert_eq!(anchor, name.to_lowercase(), "{name}: {url}");
        let section = runbooks
            .split("\n## ")
            .find(|s| s.starts_with(&format!("{name}\n")))
            .unwrap_or_else(|| panic!("docs/runbooks.md has no section ## {name}"));
        for part in ["Meaning", "Confirm", "Fix", "Switch off"] {
            assert!(
                section.contains(&format!("**{part}.**")),
                "{name}: no {part}"
            );
        }
        assert!(
            section.contains("kubectl"),
            "{name}: no kubectl to confirm with"
        );
    }
}

#[tokio::test]
async fn the_dashboard_is_shipped_for_the_sidecar_and_every_query_is_promql() {
    let manifests = render(&[ON]).await.unwrap();
    let docs = documents(&manifests);
    let map = find(&docs, "ConfigMap", "ocifit-dashboard");
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    let dashboard: Value = serde_json::from_str(map["data"]["ocifit.json"].as_str().unwrap())
        .expect("the dashboard is JSON");
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "job", "namespace", "instance"]);
    let raw: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .map(|t| t["expr"].as_str().unwrap())
        .collect();
    assert!(raw.len() >= 20, "{raw:?}");
    for expr in &raw {
        let metrics = expr.matches('{').count()
            - expr
                .matches("{job=~\"$job\",namespace=~\"$namespace\",instance=~\"$instance\"")
                .count();
        assert_eq!(metrics, 0, "every series selected by the variables: {expr}");
        assert!(
            !expr.contains("rate(") || expr.contains("[$__rate_interval])"),
            "a rate over Grafana's interval, not a fixed window: {expr}"
        );
    }
    for metric in [
        "ocifit_reconcile_duration_seconds_bucket",
        "ocifit_artifact_steps_total",
        "process_resident_memory_bytes",
        "ocifit_heap_allocated_bytes",
        "ocifit_certificate_expiry_timestamp_seconds",
    ] {
        assert!(
            raw.iter().any(|e| e.contains(metric)),
            "no panel reads {metric}"
        );
    }
    let exprs: Vec<String> = raw
        .iter()
        .map(|e| ocifit_testkit::chart::grafana_query(e, "5m"))
        .collect();
    // promtool parses each query as a recording rule's expression.
    let rules = serde_json::json!({"groups": [{"name": "dashboard", "rules": exprs
        .iter()
        .enumerate()
        .map(|(i, e)| serde_json::json!({"record": format!("ocifit:dashboard:{i}"), "expr": e}))
        .collect::<Vec<_>>()}]});
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dashboard.yaml"), rules.to_string()).unwrap();
    let checked = promtool(&["check", "rules", "dashboard.yaml"], dir.path()).await;
    assert!(
        checked.as_ref().is_ok_and(|out| out.contains("SUCCESS")),
        "{checked:?}"
    );
}
