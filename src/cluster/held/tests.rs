use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

/// A held pod as the apiserver sends it, with what its author may pile on.
fn live() -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "41",
            "generateName": "web-",
            "labels": {"ours/held": "true", "app": "web"},
            "annotations": {"notes": "x".repeat(4096)},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "rs-1"}],
            "managedFields": [{"manager": "kubectl", "operation": "Update"}],
        },
        "spec": {
            "containers": [{"name": "web", "image": "web:v1", "imagePullPolicy": "Always",
                "args": ["y".repeat(4096)], "env": [{"name": "SECRET", "value": "s3cr3t"}]}],
            "tolerations": [{"key": "pool", "operator": "Exists"}],
            "schedulingGates": [{"name": "example.com/quota"}, {"name": "ours/gate"}],
            "hostname": "web",
        },
    }))
    .unwrap()
}

fn trimmed(kept: Kept) -> Pod {
    let mut pod = live();
    trim(&mut pod, &kept);
    pod
}

#[test]
fn a_trimmed_pod_keeps_its_identity_and_only_what_its_feature_reads() {
    let gates_only = trimmed(Kept {
        labels: Keys::Prefixed(&["ours/"]),
        annotations: Keys::Prefixed(&["ours/"]),
        spec: Spec::Gates,
    });
    assert_eq!(
        serde_json::to_value(&gates_only).unwrap(),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1",
                "resourceVersion": "41", "labels": {"ours/held": "true"}, "annotations": {}},
            "spec": {"containers": [],
                "schedulingGates": [{"name": "example.com/quota"}, {"name": "ours/gate"}]},
        })
    );
    let planned = trimmed(Kept {
        labels: Keys::All,
        annotations: Keys::Nothing,
        spec: Spec::Inspection,
    });
    let planned = serde_json::to_value(&planned).unwrap();
    assert_eq!(
        planned["metadata"]["labels"],
        json!({"ours/held": "true", "app": "web"})
    );
    assert_eq!(planned["metadata"]["generateName"], "web-");
    assert_eq!(planned["metadata"]["ownerReferences"][0]["name"], "web");
    assert!(planned["metadata"].get("annotations").is_none());
    assert!(planned["metadata"].get("managedFields").is_none());
    assert_eq!(
        planned["spec"]["containers"],
        json!([{"name": "web", "image": "web:v1", "imagePullPolicy": "Always"}])
    );
    assert_eq!(
        planned["spec"]["tolerations"],
        json!([{"key": "pool", "operator": "Exists"}])
    );
    assert!(planned["spec"].get("hostname").is_none());
    let scheduling = trimmed(Kept {
        labels: Keys::All,
        annotations: Keys::Nothing,
        spec: Spec::Scheduling,
    });
    let scheduling = serde_json::to_value(&scheduling).unwrap();
    assert_eq!(
        scheduling["spec"]["containers"],
        json!([{"name": "web", "image": "web:v1"}])
    );
    assert!(scheduling["spec"].get("tolerations").is_none());
    let counted = trimmed(Kept {
        labels: Keys::Prefixed(&["ours/held"]),
        annotations: Keys::Nothing,
        spec: Spec::Dropped,
    });
    assert!(counted.spec.is_none());
}

#[test]
fn a_decision_on_the_trimmed_pod_reaches_the_live_pod_leaving_what_was_trimmed_alone() {
    let read = trimmed(Kept {
        labels: Keys::All,
        annotations: Keys::Prefixed(&["ours/"]),
        spec: Spec::Inspection,
    });
    let mut planned = read.clone();
    planned
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("ours/outcome".to_owned(), "Released".to_owned());
    planned
        .metadata
        .labels
        .get_or_insert_default()
        .remove("ours/held");
    let spec = planned.spec.get_or_insert_default();
    spec.scheduling_gates.get_or_insert_default().pop();
    spec.tolerations = None;

    let patch = guarded(&read, changes(&read, &planned).unwrap());
    let mut whole = serde_json::to_value(live()).unwrap();
    json_patch::patch(&mut whole, &patch).unwrap();
    let mut expected = serde_json::to_value(live()).unwrap();
    expected["metadata"]["annotations"]["ours/outcome"] = json!("Released");
    expected["metadata"]["labels"] = json!({"app": "web"});
    expected["spec"]["schedulingGates"] = json!([{"name": "example.com/quota"}]);
    expected["spec"]
        .as_object_mut()
        .unwrap()
        .remove("tolerations");
    assert_eq!(whole, expected);
    assert!(
        changes(&read, &read).unwrap().is_empty(),
        "no change, no op"
    );
}

#[test]
fn the_release_patch_is_pinned_to_the_version_it_was_decided_from() {
    let read = live();
    let patch = serde_json::to_value(guarded(&read, [])).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "replace", "path": "/metadata/resourceVersion", "value": "41"}])
    );
    // Applied to a pod that moved on, the version goes back, which the apiserver refuses (409).
    let mut moved = serde_json::to_value(live()).unwrap();
    moved["metadata"]["resourceVersion"] = json!("42");
    json_patch::patch(&mut moved, &guarded(&read, [])).unwrap();
    assert_eq!(moved["metadata"]["resourceVersion"], "41");
}
