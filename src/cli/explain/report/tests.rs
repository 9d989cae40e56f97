use serde_json::json;

use super::*;

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

fn arm_node() -> Node {
    serde_json::from_value(json!({"metadata": {"name": "n1", "labels": {
        "kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64", "flavor": "vanilla",
        "unread": "x"}}}))
    .unwrap()
}

/// A policy whose artifact reads `flavor`, with a class per flavor on arm64.
fn flavors_policy() -> ImageSelectionPolicy {
    let class = |name: &str, flavor: &str, image: &str| {
        json!({"name": name, "nodes": 1, "image": image, "reason": format!("{flavor} matched"),
               "labels": {"flavor": flavor, "kubernetes.io/arch": "arm64",
                          "kubernetes.io/os": "linux"}})
    };
    serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ImageSelectionPolicy",
        "metadata": {"name": "flavors"},
        "spec": {"artifact": {"ref": "r/a:v1"}, "targetImage": "placeholder"},
        "status": {"classKeys": {"labels": ["flavor"]}, "classCount": 2, "classes": [
            class("c-choc", "chocolate", "app:choc"), class("c-van", "vanilla", "app:van")],
            "conditions": [{"type": "Ready", "status": "True", "reason": "Resolved",
                "message": "2 classes", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
    .unwrap()
}

#[test]
fn a_selected_pod_names_its_policy_images_and_its_node_s_class_as_the_controller_draws_it() {
    let gathered = Gathered {
        pod: pod(json!({"metadata": {"name": "web", "namespace": "shop",
            "labels": {"oci.image.compatibilities.selection/enabled": "true"},
            "annotations": {"ocifit.io/policy": "flavors", "ocifit.io/images": "{\"app\":\"app:van\"}",
                "ocifit.io/classes": "c-van", "ocifit.io/artifact-digest": "sha256:ab"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "app:van"}]}})),
        selection_policy: Some(flavors_policy()),
        node: Some(arm_node()),
        ..Gathered::default()
    };
    let report = explain(&gathered);
    let selection = report.image_selection.as_ref().unwrap();
    assert_eq!(selection.state, "selected");
    assert_eq!(selection.policy.as_deref(), Some("flavors"));
    assert_eq!(selection.images["app"], "app:van");
    let class = selection.node_class.as_ref().expect("the node's class");
    assert_eq!(
        class.name, "c-van",
        "the class of the node's flavor, not another"
    );
    assert_eq!(class.image.as_deref(), Some("app:van"));
    assert!(report.placement.is_none() && report.artifact_cache.is_none());
    let table = crate::cli::explain::table(&report);
    assert!(
        table.contains("Pod shop/web on node n1 (linux/arm64)"),
        "{table}"
    );
    assert!(
        table.contains("node's class c-van: app:van (vanilla matched)"),
        "{table}"
    );
    assert!(table.contains("container app: app:van"), "{table}");
}

#[test]
fn a_gated_pod_says_the_gate_is_on_and_why_and_its_exec_format_errors() {
    let event: Event = serde_json::from_value(json!({"metadata": {"name": "e"},
        "involvedObject": {}, "type": "Warning", "reason": "ExecFormatError",
        "message": "container app: exec format error on node n1 (linux/arm64)", "count": 2}))
    .unwrap();
    let gathered = Gathered {
        pod: pod(json!({"metadata": {"name": "job", "namespace": "shop",
            "labels": {"placement.ocifit.io/policy": "default"},
            "annotations": {"placement.ocifit.io/outcome": "Held",
                "placement.ocifit.io/message": "allow none of the platforms",
                "placement.ocifit.io/digests": "{\"app\":\"sha256:cd\"}"}},
            "spec": {"schedulingGates": [{"name": "placement.ocifit.io/platforms"}],
                "containers": [{"name": "app", "image": "app:1"}]}})),
        events: vec![event],
        ..Gathered::default()
    };
    let report = explain(&gathered);
    let placement = report.placement.as_ref().unwrap();
    assert_eq!(placement.gate, "held");
    assert_eq!(placement.outcome.as_deref(), Some("Held"));
    assert_eq!(placement.digests["app"], "sha256:cd");
    assert_eq!(placement.exec_format_errors.len(), 1);
    assert!(!placement.policy_found);
    assert_eq!(report.scheduling_gates, ["placement.ocifit.io/platforms"]);
    let table = crate::cli::explain::table(&report);
    assert!(
        table.contains("Placement: gate held by policy default, Held"),
        "{table}"
    );
    assert!(
        table.contains("why: allow none of the platforms"),
        "{table}"
    );
    assert!(table.contains("Warning ExecFormatError (x2)"), "{table}");
}

#[test]
fn a_step_pod_names_its_cache_steps_and_helpers_with_their_state() {
    let gathered = Gathered {
        pod: pod(json!({"metadata": {"name": "step", "namespace": "wf",
            "annotations": {
                "artifacts.ocifit.io/injected": "ArtifactCache oras at oras.wf.svc:5000",
                "oras.converged-computing.github.io/input-uri": "data/in:v1",
                "oras.converged-computing.github.io/output-uri": "data/out:v1",
                "oras.converged-computing.github.io/output-path": "out"}},
            "spec": {"schedulingGates": [{"name": "artifacts.ocifit.io/cache"}],
                "initContainers": [{"name": "ocifit-prepare", "image": "ocifit"},
                                   {"name": "ocifit-push", "image": "ocifit"}],
                "containers": [{"name": "step", "image": "busybox"}]},
            "status": {"initContainerStatuses": [{"name": "ocifit-prepare", "image": "ocifit",
                "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0}}}]}})),
        ..Gathered::default()
    };
    let report = explain(&gathered);
    let steps = report.artifact_cache.as_ref().unwrap();
    assert_eq!(steps.cache.as_deref(), Some("oras"));
    assert_eq!(steps.endpoint.as_deref(), Some("oras.wf.svc:5000"));
    assert_eq!(steps.gate, "held");
    assert_eq!(steps.inputs, ["data/in:v1"]);
    assert_eq!(steps.output.as_deref(), Some("data/out:v1 from out"));
    assert_eq!(
        steps.helpers,
        ["ocifit-prepare (exited 0)", "ocifit-push (not started)"]
    );
}

#[test]
fn a_pod_no_feature_touched_says_so() {
    let gathered = Gathered {
        pod: pod(json!({"metadata": {"name": "plain", "namespace": "shop"},
            "spec": {"containers": [{"name": "app", "image": "app:1"}]}})),
        ..Gathered::default()
    };
    let report = explain(&gathered);
    assert!(report.image_selection.is_none());
    let table = crate::cli::explain::table(&report);
    assert!(table.contains("ocifit did nothing to this pod"), "{table}");
}
