use serde_json::{Value, json};

use super::*;
use crate::api::{ArtifactCache, PlacementPolicy};

pub(super) fn fixture(name: &str) -> Vec<Document> {
    let path = format!(
        "{}/tests/fixtures/migrate/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    parse(name, &text).unwrap()
}

pub(super) fn objects(migration: &Migration) -> Vec<&Value> {
    migration
        .objects
        .iter()
        .filter_map(|o| o.object.as_ref())
        .collect()
}

pub(super) fn notes(migration: &Migration) -> String {
    migration
        .objects
        .iter()
        .flat_map(|o| o.notes.iter())
        .chain(migration.values.notes.iter())
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn one(value: Value) -> Vec<Document> {
    vec![Document {
        source: "input#1".into(),
        value,
    }]
}

#[test]
fn an_oras_cache_becomes_an_artifact_cache_with_its_registry_env_from_secrets() {
    let migration = translate(&fixture("oras-cache.yaml"));
    let objects = objects(&migration);
    assert_eq!(objects.len(), 4, "{objects:#?}");
    let cache: ArtifactCache = serde_json::from_value(objects[0].clone()).unwrap();
    assert_eq!(cache.metadata.name.as_deref(), Some("orascache-sample"));
    assert_eq!(cache.metadata.namespace.as_deref(), Some("workflow"));
    assert!(cache.spec.deploy);
    // The seed's default image is not carried over: ocifit deploys its own pinned default.
    assert_eq!(cache.spec.image, None);
    let env: Vec<String> = cache
        .spec
        .env_secret_refs
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(env, ["oras-registry-env", "orascache-sample-registry-http"]);
    assert_eq!(objects[1]["kind"], "Secret");
    assert_eq!(
        objects[1]["metadata"]["name"],
        "orascache-sample-registry-http"
    );
    assert_eq!(objects[1]["metadata"]["namespace"], "workflow");
    assert_eq!(
        objects[1]["stringData"]["REGISTRY_HTTP_SECRET"],
        "a-shared-http-secret"
    );
    let notes = notes(&migration);
    assert!(
        notes.contains("kubectl label namespace workflow artifacts.ocifit.io/steps=enabled"),
        "{notes}"
    );
    assert!(
        notes.contains("spec.image: ghcr.io/oras-project/registry:latest"),
        "{notes}"
    );
}

#[test]
fn a_cache_that_deploys_nothing_becomes_a_note_on_registry_allowed() {
    let migration = translate(&fixture("oras-cache.yaml"));
    let notes = notes(&migration);
    assert!(
        notes.contains("OrasCache remote/oras has deploy: false"),
        "{notes}"
    );
    assert!(
        migration
            .values
            .notes
            .iter()
            .any(|n| n.starts_with("registry.allowed:")),
        "{notes}"
    );
    assert!(
        !objects(&migration)
            .iter()
            .any(|o| o["metadata"]["namespace"] == "remote")
    );
}

#[test]
fn a_custom_registry_image_is_kept_and_allowed_beside_the_default() {
    let migration = translate(&one(json!({
        "apiVersion": "cache.converged-computing.github.io/v1alpha1",
        "kind": "OrasCache",
        "metadata": {"name": "oras"},
        "spec": {"image": "registry.example.com/registry:2.8", "service": {"name": "svc"}, "replicas": 3}
    })));
    let cache: ArtifactCache = serde_json::from_value(objects(&migration)[0].clone()).unwrap();
    assert_eq!(
        cache.spec.image.as_deref(),
        Some("registry.example.com/registry:2.8")
    );
    assert_eq!(
        migration.values.object,
        Some(json!({"artifactCache": {"registryImages": [
            "docker.io/library/registry:3.0.0", "registry.example.com/registry:2.8"
        ]}}))
    );
    let notes = notes(&migration);
    assert!(
        notes.contains("spec.service: {\"name\":\"svc\"}: not carried over"),
        "{notes}"
    );
    assert!(
        notes.contains("spec.replicas: 3: not carried over"),
        "{notes}"
    );
}

#[test]
fn kube_arch_webhook_values_become_a_placement_policy_and_chart_values() {
    let migration = translate(&fixture("kube-arch-webhook-first-spelling.yaml"));
    let objects = objects(&migration);
    assert_eq!(objects.len(), 1);
    let policy: PlacementPolicy = serde_json::from_value(objects[0].clone()).unwrap();
    assert_eq!(policy.spec.tag_cache.if_not_present, "7d");
    assert_eq!(policy.spec.tag_cache.always, "0s");
    assert!(policy.spec.operator_credentials);
    assert_eq!(policy.spec.architectures.len(), 1);
    let arm64 = &policy.spec.architectures[0];
    assert_eq!(arm64.name, "arm64");
    assert_eq!(arm64.tolerations[0].key.as_deref(), Some("ARM"));
    assert_eq!(
        arm64.require_node_labels["node.example.com/pool"],
        "graviton"
    );
    assert_eq!(
        migration.values.object,
        Some(json!({"placement": {
            "dockerConfigSecret": "registry-credentials",
            "webhook": {
                "failurePolicy": "Ignore",
                // The chart always excludes kube-system.
                "namespaceSelector": {"matchExpressions": []},
                "objectSelector": {},
                "reinvocationPolicy": "IfNeeded",
            }
        }}))
    );
    let notes = notes(&migration);
    assert!(
        notes.contains("replicaCount: 2: not carried over"),
        "{notes}"
    );
    // A term asking only for the architecture itself is what ocifit adds anyway: no note.
    assert!(!notes.contains("nodeAffinitySelectorTerms"), "{notes}");
}

#[test]
fn required_node_labels_are_carried_and_alternatives_and_bad_durations_are_named() {
    let migration = translate(&one(json!({
        "ifNotPresentCacheTime": "a week",
        "architectures": {
            "arm64": {
                "requireNodeLabels": {"tier": "batch"},
                "nodeAffinitySelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                    {"key": "pool", "operator": "In", "values": ["graviton"]}
                ]}]
            },
            "amd64": {"nodeAffinitySelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]}
            ]}
        }
    })));
    let policy: PlacementPolicy = serde_json::from_value(objects(&migration)[0].clone()).unwrap();
    assert_eq!(policy.spec.tag_cache.if_not_present, "24h");
    let arch = |name: &str| {
        policy
            .spec
            .architectures
            .iter()
            .find(|a| a.name == name)
            .unwrap()
            .require_node_labels
            .clone()
    };
    assert_eq!(
        arch("arm64"),
        std::collections::BTreeMap::from([
            ("pool".to_owned(), "graviton".to_owned()),
            ("tier".to_owned(), "batch".to_owned())
        ])
    );
    assert!(arch("amd64").is_empty());
    let notes = notes(&migration);
    assert!(
        notes.contains("ifNotPresentCacheTime: a week: not carried over"),
        "{notes}"
    );
    assert!(
        notes.contains("architectures.amd64.nodeAffinitySelectorTerms: [{\"matchExpressions\""),
        "{notes}"
    );
    assert!(!notes.contains("architectures.arm64"), "{notes}");
}

#[test]
fn archaware_controller_becomes_node_tainting_for_the_architectures_it_tolerated() {
    let migration = translate(&fixture("archaware-controller.yaml"));
    let objects = objects(&migration);
    assert_eq!(objects.len(), 1, "{objects:#?}");
    let policy: PlacementPolicy = serde_json::from_value(objects[0].clone()).unwrap();
    assert_eq!(
        policy.metadata.name.as_deref(),
        Some("archaware-controller")
    );
    // amd64 is left untainted, for the pods ocifit never tolerates.
    assert_eq!(policy.spec.node_tainting.unwrap().architectures, ["arm"]);
    let notes = notes(&migration);
    for name in [
        "ServiceAccount kube-system/archaware-controller-serviceaccount",
        "ClusterRole archaware-controller-pod-node-editor",
        "ClusterRoleBinding archaware-controller-edit-pods-nodes",
    ] {
        assert!(
            notes.contains(&format!("{name}: not carried over")),
            "{notes}"
        );
    }
    assert!(
        notes.contains("kubectl taint nodes --all supported-arch-"),
        "{notes}"
    );
    assert_eq!(migration.values, Output::default());
}

#[test]
fn an_archaware_deployment_without_its_tolerations_taints_nothing_and_says_so() {
    let migration = translate(&one(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "arch"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "learnitall/archaware-controller:v1"}]}}}
    })));
    let policy: PlacementPolicy = serde_json::from_value(objects(&migration)[0].clone()).unwrap();
    assert_eq!(policy.spec.node_tainting, None);
    assert!(notes(&migration).contains("spec.nodeTainting: not carried over"));
}

#[test]
fn anything_else_is_left_out_with_a_note_naming_it() {
    let migration = translate(&one(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}
    })));
    assert!(objects(&migration).is_empty());
    assert_eq!(
        notes(&migration),
        "input#1: ConfigMap y/x is none of the seeds' objects or values: left out"
    );
}

#[test]
fn the_rendered_stream_holds_every_object_with_its_notes_as_comments() {
    let mut documents = fixture("oras-cache.yaml");
    documents.extend(fixture("archaware-controller.yaml"));
    let migration = translate(&documents);
    let text = render_objects(&migration).unwrap();
    let back = parse("out", &text).unwrap();
    let kinds: Vec<&str> = back
        .iter()
        .map(|d| d.value["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ArtifactCache",
            "Secret",
            "ArtifactCache",
            "Secret",
            "PlacementPolicy"
        ]
    );
    for line in text.lines() {
        assert!(
            line.starts_with('#') || line == "---" || !line.contains("not carried over"),
            "a note outside a comment: {line}"
        );
    }
    assert!(text.contains("\n# oras-cache.yaml#2: OrasCache remote/oras has deploy: false"));
}

#[test]
fn rendered_values_are_a_yaml_map_after_their_notes() {
    let migration = translate(&fixture("kube-arch-webhook-first-spelling.yaml"));
    let text = render_values(&migration).unwrap().unwrap();
    assert!(text.contains("# placement.dockerConfigSecret: registry-credentials must be"));
    let back: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(back, migration.values.object.unwrap());
    assert_eq!(render_values(&Migration::default()).unwrap(), None);
}

#[test]
fn a_file_that_is_not_yaml_is_an_error_naming_it() {
    let err = parse("values.yaml", "a: [b").unwrap_err().to_string();
    assert!(
        err.starts_with("values.yaml is not valid YAML or JSON"),
        "{err}"
    );
}

#[test]
fn a_list_as_kubectl_prints_it_is_read_item_by_item() {
    let migration = translate(&one(json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [{
            "apiVersion": "cache.converged-computing.github.io/v1alpha1",
            "kind": "OrasCache",
            "metadata": {"name": "oras", "namespace": "a", "uid": "x", "resourceVersion": "7"},
            "spec": {"image": "ghcr.io/oras-project/registry:latest"}
        }]
    })));
    let objects = objects(&migration);
    assert_eq!(objects.len(), 1);
    // Only what a user writes is carried over, never what the apiserver filled in.
    assert_eq!(
        objects[0]["metadata"],
        json!({"name": "oras", "namespace": "a"})
    );
    assert!(notes(&migration).starts_with("input#1 item 1: OrasCache a/oras"));
}
