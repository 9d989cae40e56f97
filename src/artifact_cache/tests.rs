use kube::api::ObjectMeta;

use super::*;

#[test]
fn a_cache_is_held_without_its_labels_annotations_and_managed_fields() {
    let big = "x".repeat(200 * 1024);
    let mut cache: ArtifactCache = serde_json::from_value(serde_json::json!({
        "apiVersion": "ocifit.io/v1alpha1",
        "kind": "ArtifactCache",
        "metadata": {
            "name": "oras", "namespace": "workflow", "uid": "c-1", "generation": 3,
            "resourceVersion": "7",
            "labels": {"team": "a"},
            "annotations": {"fat": big},
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}]
        },
        "spec": {"deploy": false, "endpoint": "registry.example.com"},
        "status": {"endpoint": "registry.example.com", "observedGeneration": 3}
    }))
    .unwrap();
    let spec = cache.spec.clone();
    let status = cache.status.clone();
    trim(&mut cache);
    assert_eq!(
        cache.metadata,
        ObjectMeta {
            name: Some("oras".into()),
            namespace: Some("workflow".into()),
            uid: Some("c-1".into()),
            generation: Some(3),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        }
    );
    assert_eq!(
        cache.spec, spec,
        "the controller and the step routes read all of it"
    );
    assert_eq!(cache.status, status);
}
