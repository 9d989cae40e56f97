//! The chart's `helm test` (templates/tests/): one pod of ocifit's own image runs `ocifit
//! selftest` for each enabled webhook, in a namespace labelled for all of them, with the RBAC to
//! dry-run and a PlacementPolicy that selects only placement's probe there. The real run is the
//! cluster test `platform::chart_real_node`.

use serde_json::{Value, json};

use super::{documents, find, has, render};

fn test_objects(rendered: &[Value]) -> Vec<&Value> {
    rendered
        .iter()
        .filter(|d| d["metadata"]["annotations"]["helm.sh/hook"] == "test")
        .collect()
}

fn selftest_args(rendered: &[Value]) -> Vec<String> {
    find(rendered, "Pod", "ocifit-test")["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect()
}

#[tokio::test]
async fn helm_test_checks_every_enabled_webhook_from_ocifits_own_image() {
    let rendered = documents(&render(&[]).await.unwrap());
    let pod = find(&rendered, "Pod", "ocifit-test");
    let deployment = find(&rendered, "Deployment", "ocifit-controller");
    let operator = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        pod["spec"]["containers"][0]["image"],
        operator["containers"][0]["image"]
    );
    assert_eq!(
        pod["spec"]["containers"][0]["securityContext"],
        operator["containers"][0]["securityContext"]
    );
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    assert_eq!(
        selftest_args(&rendered),
        [
            "selftest",
            "--namespace=ocifit-test",
            "--webhook=placement",
            "--webhook=image-selection",
            "--webhook=steps"
        ]
    );
    // Every object of the test is a test hook: nothing of it exists before `helm test`.
    let mut kinds: Vec<&str> = test_objects(&rendered)
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "PlacementPolicy",
            "Pod",
            "Role",
            "RoleBinding",
            "ServiceAccount"
        ]
    );

    let off = documents(
        &render(&["placement.enabled=false", "artifactCache.enabled=false"])
            .await
            .unwrap(),
    );
    assert_eq!(
        selftest_args(&off),
        [
            "selftest",
            "--namespace=ocifit-test",
            "--webhook=image-selection"
        ]
    );
    assert!(!has(&off, "PlacementPolicy", "ocifit-test"));
}

#[tokio::test]
async fn the_test_namespace_is_covered_by_every_webhook_and_may_only_be_dry_run_into() {
    let rendered = documents(
        &render(&[
            "webhook.namespaceSelector.matchLabels.team=a",
            "placement.webhook.namespaceSelector.matchLabels.placement=on",
            "placement.webhook.objectSelector.matchLabels.tier=web",
        ])
        .await
        .unwrap(),
    );
    let namespace = find(&rendered, "Namespace", "ocifit-test");
    let labels = &namespace["metadata"]["labels"];
    assert_eq!(labels["artifacts.ocifit.io/steps"], "enabled");
    assert_eq!(labels["team"], "a");
    assert_eq!(labels["placement"], "on");
    assert!(selftest_args(&rendered).contains(&"--pod-label=tier=web".to_owned()));

    let role = find(&rendered, "Role", "ocifit-test");
    assert_eq!(role["metadata"]["namespace"], "ocifit-test");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
        ])
    );
    let policy = find(&rendered, "PlacementPolicy", "ocifit-test");
    assert_eq!(
        policy["spec"]["namespaceSelector"],
        json!({"matchLabels": {"kubernetes.io/metadata.name": "ocifit-test"}})
    );
    assert_eq!(
        policy["spec"]["podSelector"],
        json!({"matchLabels": {ocifit::cli::PROBE_LABEL: ocifit::cli::PLACEMENT_PROBE}})
    );
}
