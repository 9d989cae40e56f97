use serde_json::json;

use super::*;

fn cache(spec: serde_json::Value) -> ArtifactCache {
    serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1",
        "kind": "ArtifactCache",
        "metadata": {"name": "oras", "namespace": "workflow", "uid": "4f3c-uid"},
        "spec": spec
    }))
    .unwrap()
}

fn pod(desired: &Desired) -> &PodSpec {
    desired
        .deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
}

fn registry_container(desired: &Desired) -> &Container {
    &pod(desired).containers[0]
}

fn env(container: &Container) -> BTreeMap<String, String> {
    container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn an_empty_spec_deploys_the_default_registry_on_a_bounded_empty_dir() {
    let desired = desired(&cache(json!({}))).unwrap().unwrap();
    let container = registry_container(&desired);
    assert_eq!(container.image.as_deref(), Some(DEFAULT_REGISTRY_IMAGE));
    assert_eq!(env(container)["REGISTRY_HTTP_ADDR"], ":5000");
    assert_eq!(
        env(container)["REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY"],
        "/var/lib/registry"
    );
    let pod = pod(&desired);
    let data = &pod.volumes.as_ref().unwrap()[0];
    assert_eq!(
        data.empty_dir.as_ref().unwrap().size_limit,
        Some(Quantity("10Gi".into()))
    );
    assert!(desired.claim.is_none());
    assert_eq!(
        desired.deployment.metadata.name.as_deref(),
        Some("oras-registry")
    );
    assert_eq!(
        desired.deployment.metadata.namespace.as_deref(),
        Some("workflow")
    );
}

#[test]
fn every_object_is_controlled_by_the_cache() {
    let desired = desired(&cache(
        json!({"storage": {"persistentVolumeClaim": {"size": "20Gi"}}}),
    ))
    .unwrap()
    .unwrap();
    for owners in [
        &desired.deployment.metadata.owner_references,
        &desired.service.metadata.owner_references,
        &desired.claim.as_ref().unwrap().metadata.owner_references,
    ] {
        let owner = &owners.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("ArtifactCache", "oras", "4f3c-uid", Some(true))
        );
        assert_eq!(owner.api_version, "ocifit.io/v1alpha1");
    }
}

#[test]
fn a_claim_backs_the_registry_when_storage_asks_for_one() {
    let desired = desired(&cache(json!({
        "storage": {"persistentVolumeClaim": {"size": "20Gi", "storageClassName": "fast"}}
    })))
    .unwrap()
    .unwrap();
    let claim = desired.claim.as_ref().unwrap();
    assert_eq!(claim.metadata.name.as_deref(), Some("oras-registry-data"));
    let spec = claim.spec.as_ref().unwrap();
    assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
    assert_eq!(
        spec.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"],
        Quantity("20Gi".into())
    );
    let pod = pod(&desired);
    let data = pod.volumes.as_ref().unwrap()[0]
        .persistent_volume_claim
        .as_ref()
        .unwrap();
    assert_eq!(data.claim_name, "oras-registry-data");
    let strategy = desired
        .deployment
        .spec
        .as_ref()
        .unwrap()
        .strategy
        .as_ref()
        .unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("Recreate"));
}

#[test]
fn an_htpasswd_secret_turns_on_basic_auth_and_a_tcp_probe() {
    let desired = desired(&cache(
        json!({"htpasswdSecretRef": {"name": "cache-users", "key": "users"}}),
    ))
    .unwrap()
    .unwrap();
    let container = registry_container(&desired);
    assert_eq!(
        env(container)["REGISTRY_AUTH_HTPASSWD_PATH"],
        "/auth/htpasswd"
    );
    assert_eq!(env(container)["REGISTRY_AUTH_HTPASSWD_REALM"], "oras");
    let pod = pod(&desired);
    let secret = pod.volumes.as_ref().unwrap()[1].secret.as_ref().unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("cache-users"));
    assert_eq!(secret.items.as_ref().unwrap()[0].key, "users");
    assert!(
        container
            .readiness_probe
            .as_ref()
            .unwrap()
            .tcp_socket
            .is_some()
    );
}

#[test]
fn image_and_resources_are_the_specs() {
    let desired = desired(&cache(json!({
        "image": "127.0.0.1:5000/registry:test",
        "resources": {"limits": {"memory": "256Mi"}}
    })))
    .unwrap()
    .unwrap();
    let container = registry_container(&desired);
    assert_eq!(
        container.image.as_deref(),
        Some("127.0.0.1:5000/registry:test")
    );
    assert_eq!(
        container
            .resources
            .as_ref()
            .unwrap()
            .limits
            .as_ref()
            .unwrap()["memory"],
        Quantity("256Mi".into())
    );
}

#[test]
fn the_service_selects_the_registrys_pods_on_the_registry_port() {
    let desired = desired(&cache(json!({}))).unwrap().unwrap();
    let service = desired.service.spec.as_ref().unwrap();
    let template_labels = desired
        .deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    for (key, value) in service.selector.as_ref().unwrap() {
        assert_eq!(template_labels.get(key), Some(value), "{key}");
    }
    assert_eq!(service.ports.as_ref().unwrap()[0].port, 5000);
    assert_eq!(service.type_.as_deref(), Some("ClusterIP"));
}

#[test]
fn a_cache_that_deploys_nothing_owns_nothing() {
    let external = cache(json!({"deploy": false, "endpoint": "registry.example.com"}));
    assert_eq!(desired(&external), Ok(None));
}

#[test]
fn an_unstored_cache_has_no_owner_to_name() {
    let mut unstored = cache(json!({}));
    unstored.metadata.uid = None;
    assert_eq!(desired(&unstored), Err(DesiredError::NotStored("uid")));
}

#[test]
fn names_that_cannot_name_a_service_are_hashed() {
    assert_eq!(object_name("oras"), "oras-registry");
    let dotted = object_name("team.cache");
    assert!(
        dotted.starts_with("artifact-cache-") && dotted.len() == 25,
        "{dotted}"
    );
    assert_ne!(object_name("a.b"), object_name("a.c"));
    let long = "x".repeat(60);
    assert!(object_name(&long).len() <= 63);
    assert_eq!(object_name("9lives"), object_name("9lives"), "stable");
    assert!(
        object_name("9lives").starts_with("artifact-cache-"),
        "a Service name starts with a letter"
    );
}

#[test]
fn the_registry_pod_is_placed_by_the_caches_node_selector_and_tolerations() {
    let desired = desired(&cache(json!({
        "nodeSelector": {"kubernetes.io/hostname": "worker-real"},
        "tolerations": [{"key": "demo.ocifit.io/real-node", "operator": "Exists", "effect": "NoSchedule"}]
    })))
    .unwrap()
    .unwrap();
    let pod = pod(&desired);
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["kubernetes.io/hostname"],
        "worker-real"
    );
    let toleration = &pod.tolerations.as_ref().unwrap()[0];
    assert_eq!(toleration.key.as_deref(), Some("demo.ocifit.io/real-node"));
    assert_eq!(toleration.effect.as_deref(), Some("NoSchedule"));
}
