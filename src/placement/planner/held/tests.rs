use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::api::placement_pod::{
    ATTEMPTS_ANNOTATION, DIGESTS_ANNOTATION, MESSAGE_ANNOTATION, OUTCOME_ANNOTATION, Outcome,
    PLATFORMS_ANNOTATION,
};
use crate::placement::fixtures::{inspected, policy};
use crate::placement::planner::release;
use kube::core::SelectorExt;

/// A pod as the apiserver sends it: gated (or not), with what a pod author may pile on.
fn live(gated: bool) -> Pod {
    let gates = if gated {
        json!([{"name": "example.com/quota"}, {"name": SCHEDULING_GATE}])
    } else {
        json!([{"name": "example.com/quota"}])
    };
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "uid": "u-1",
            "resourceVersion": "41",
            "creationTimestamp": "2026-11-25T19:00:00Z",
            "labels": {POLICY_LABEL: "arm", "app": "web"},
            "annotations": {
                OUTCOME_ANNOTATION: "Held",
                "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(4096),
            },
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "rs-1", "controller": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Update"}],
            "finalizers": ["example.com/keep"],
        },
        "spec": {
            "initContainers": [{"name": "init", "image": "registry.example.com/init:v1",
                "command": ["sh", "-c"], "args": ["y".repeat(4096)]}],
            "containers": [{"name": "web", "image": "registry.example.com/web:v1",
                "imagePullPolicy": "Always", "args": ["x".repeat(8192)],
                "env": [{"name": "SECRET", "value": "s3cr3t"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "resources": {"limits": {"memory": "1Gi"}}}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "imagePullSecrets": [{"name": "regcred"}],
            "serviceAccountName": "web",
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
            "tolerations": [{"key": "pool", "operator": "Exists"}],
            "os": {"name": "linux"},
            "schedulingGates": gates,
            "hostname": "web",
            "priority": 7,
        },
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
    }))
    .unwrap()
}

fn trimmed(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    trim_held(&mut pod);
    pod
}

#[test]
fn a_gated_pod_keeps_what_placement_reads_and_nothing_a_pod_author_piles_on() {
    let held = serde_json::to_value(trimmed(&live(true))).unwrap();
    assert_eq!(
        held,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-1",
                "namespace": "shop",
                "uid": "u-1",
                "resourceVersion": "41",
                "creationTimestamp": "2026-11-25T19:00:00Z",
                "labels": {POLICY_LABEL: "arm", "app": "web"},
                "annotations": {OUTCOME_ANNOTATION: "Held"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "rs-1", "controller": true}],
            },
            "spec": {
                "initContainers": [{"name": "init", "image": "registry.example.com/init:v1"}],
                "containers": [{"name": "web", "image": "registry.example.com/web:v1",
                    "imagePullPolicy": "Always"}],
                "imagePullSecrets": [{"name": "regcred"}],
                "serviceAccountName": "web",
                "nodeSelector": {"disk": "ssd"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
                "tolerations": [{"key": "pool", "operator": "Exists"}],
                "os": {"name": "linux"},
                "schedulingGates": [{"name": "example.com/quota"}, {"name": SCHEDULING_GATE}],
            },
        })
    );
}

#[test]
fn a_pod_without_ocifits_gate_keeps_its_name_and_the_policy_it_counts_for() {
    let held = serde_json::to_value(trimmed(&live(false))).unwrap();
    assert_eq!(
        held,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-1",
                "namespace": "shop",
                "uid": "u-1",
                "resourceVersion": "41",
                "creationTimestamp": "2026-11-25T19:00:00Z",
                "labels": {POLICY_LABEL: "arm"},
            },
        })
    );
    let counted = crate::placement::status::counts([&trimmed(&live(false))]);
    assert_eq!(counted["arm"].released, 1, "still counted as released");
}

#[test]
fn every_annotation_placement_reads_or_writes_is_kept() {
    for key in [
        OUTCOME_ANNOTATION,
        PLATFORMS_ANNOTATION,
        DIGESTS_ANNOTATION,
        MESSAGE_ANNOTATION,
        ATTEMPTS_ANNOTATION,
    ] {
        assert!(key.starts_with(OWN_ANNOTATIONS), "{key}");
    }
}

fn plan_for(pod: &Pod) -> release::ReleasePlan {
    let policy = policy(
        "arm",
        json!({"architectures": [{"name": "arm64", "weight": 50,
            "tolerations": [{"key": "arm", "operator": "Exists"}]}]}),
    );
    release::plan_release(
        pod,
        &[
            inspected("init", &["linux/amd64", "linux/arm64"]),
            inspected("web", &["linux/arm64"]),
        ],
        release::ReleaseInputs {
            policy: &policy,
            tainted: &BTreeSet::from(["arm64".to_owned()]),
            since_creation: Duration::from_secs(3),
        },
    )
}

#[test]
fn a_release_planned_on_the_trimmed_pod_patches_the_live_pod_as_a_plan_on_the_whole_pod_would() {
    let whole = live(true);
    let held = trimmed(&whole);
    let plan = plan_for(&held);
    assert_eq!(plan.outcome, plan_for(&whole).outcome);
    let patch = release_patch(&held, &plan.pod)
        .unwrap()
        .expect("a release changes the pod");

    let mut patched = serde_json::to_value(&whole).unwrap();
    json_patch::patch(&mut patched, &patch).unwrap();
    let expected = serde_json::to_value(plan_for(&whole).pod).unwrap();
    assert_eq!(patched, expected);
    // What the pod's author wrote is still there, read back from the patched pod.
    let patched: Pod = serde_json::from_value(patched).unwrap();
    assert_eq!(patched.spec, {
        let mut spec = whole.spec.clone().unwrap();
        let planned = plan_for(&whole).pod.spec.unwrap();
        spec.scheduling_gates = planned.scheduling_gates;
        spec.affinity = planned.affinity;
        spec.tolerations = planned.tolerations;
        Some(spec)
    });
    assert_eq!(
        patched.metadata.annotations.unwrap()["kubectl.kubernetes.io/last-applied-configuration"],
        "x".repeat(4096)
    );
}

#[test]
fn the_patch_holds_only_what_the_plan_changed_and_the_version_it_was_planned_from() {
    let held = trimmed(&live(true));
    let patch = release_patch(&held, &plan_for(&held).pod).unwrap().unwrap();
    let ops = serde_json::to_value(&patch).unwrap();
    let ops = ops.as_array().unwrap();
    assert_eq!(
        ops[0],
        json!({"op": "replace", "path": "/metadata/resourceVersion", "value": "41"})
    );
    let touched: BTreeSet<String> = ops
        .iter()
        .map(|op| {
            let path = op["path"].as_str().unwrap();
            path.split('/').take(3).collect::<Vec<_>>().join("/")
        })
        .collect();
    assert_eq!(
        touched,
        BTreeSet::from(
            [
                "/metadata/annotations",
                "/metadata/labels",
                "/metadata/resourceVersion",
                "/spec/affinity",
                "/spec/schedulingGates",
                "/spec/tolerations",
            ]
            .map(str::to_owned)
        )
    );
    let gates = ops
        .iter()
        .find(|op| op["path"] == "/spec/schedulingGates")
        .unwrap();
    assert_eq!(gates["value"], json!([{"name": "example.com/quota"}]));
    assert_eq!(
        release_patch(&held, &held).unwrap(),
        None,
        "no change, no write"
    );
}

/// The labels of `pod` once `patch` reached it.
fn labels_after(pod: &Pod, patch: &json_patch::Patch) -> BTreeMap<String, String> {
    let mut patched = serde_json::to_value(pod).unwrap();
    json_patch::patch(&mut patched, patch).unwrap();
    serde_json::from_value::<Pod>(patched)
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default()
}

#[test]
fn a_released_pod_leaves_the_watch_and_a_held_one_stays_in_it() {
    let watched = held_selector();
    let whole = live(true);
    let held = trimmed(&whole);
    assert!(watched.matches(whole.metadata.labels.as_ref().unwrap()));

    let released = plan_for(&held);
    assert_eq!(released.outcome, Some(Outcome::Constrained));
    let patch = release_patch(&held, &released.pod).unwrap().unwrap();
    let after = labels_after(&whole, &patch);
    assert_eq!(after[POLICY_LABEL], "arm", "the record stays");
    assert!(
        !watched.matches(&after),
        "released, yet still watched: {after:?}"
    );

    let mut unusable = whole.clone();
    unusable.spec.as_mut().unwrap().node_selector = Some(BTreeMap::from([(
        "kubernetes.io/arch".to_owned(),
        "s390x".to_owned(),
    )]));
    let hold = plan_for(&trimmed(&unusable));
    assert_eq!(hold.outcome, Some(Outcome::Held));
    let patch = release_patch(&trimmed(&unusable), &hold.pod)
        .unwrap()
        .unwrap();
    assert!(watched.matches(&labels_after(&unusable, &patch)));
}
