use serde_json::json;

use k8s_openapi::api::core::v1::Container;

use super::fixtures::{GENERATED, cache, made, pod, registry_container};
use super::*;

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
    let desired = made(&cache(json!({}))).unwrap().unwrap();
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
    let desired = made(&cache(
        json!({"storage": {"persistentVolumeClaim": {"size": "20Gi"}}}),
    ))
    .unwrap()
    .unwrap();
    for owners in [
        &desired.deployment.metadata.owner_references,
        &desired.service.metadata.owner_references,
        &desired.network_policy.metadata.owner_references,
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
    let desired = made(&cache(json!({
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
    let desired = made(&cache(
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
    let desired = made(&cache(json!({
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
    let desired = made(&cache(json!({}))).unwrap().unwrap();
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
    assert_eq!(made(&external), Ok(None));
}

#[test]
fn an_unstored_cache_has_no_owner_to_name() {
    let mut unstored = cache(json!({}));
    unstored.metadata.uid = None;
    assert_eq!(made(&unstored), Err(DesiredError::NotStored("uid")));
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
    let desired = made(&cache(json!({
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

#[test]
fn deletes_are_off_and_every_request_needs_the_generated_credentials() {
    let desired = made(&cache(json!({}))).unwrap().unwrap();
    let container = registry_container(&desired);
    let env = env(container);
    assert_eq!(env["REGISTRY_STORAGE_DELETE_ENABLED"], "false");
    assert_eq!(env["REGISTRY_AUTH_HTPASSWD_PATH"], "/auth/htpasswd");
    let pod = pod(&desired);
    let secret = pod.volumes.as_ref().unwrap()[1].secret.as_ref().unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some(GENERATED));
    assert_eq!(secret.items.as_ref().unwrap()[0].key, "htpasswd");
    let text = serde_json::to_string(&desired.deployment).unwrap();
    assert!(!text.contains("ORAS_"), "no credential in the spec: {text}");
}

#[test]
fn no_registry_is_deployed_without_credentials() {
    let settings = CacheEnvironment {
        own_namespace: "ocifit-system",
        credentials: None,
    };
    assert_eq!(
        desired(&cache(json!({})), settings),
        Err(DesiredError::NoCredentials)
    );
    let own = cache(json!({"htpasswdSecretRef": {"name": "cache-users"}}));
    assert!(desired(&own, settings).unwrap().is_some());
}

#[test]
fn the_registry_pod_passes_pod_security_restricted() {
    let desired = made(&cache(json!({}))).unwrap().unwrap();
    let pod = pod(&desired);
    let pod_security = pod.security_context.as_ref().unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert!(pod_security.run_as_user.is_some_and(|uid| uid > 0));
    assert_eq!(
        pod_security.seccomp_profile.as_ref().unwrap().type_,
        "RuntimeDefault"
    );
    let container = &pod.containers[0];
    let security = container.security_context.as_ref().unwrap();
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(
        security.capabilities.as_ref().unwrap().drop,
        Some(vec!["ALL".to_string()])
    );
    assert_eq!(security.privileged, None);
    let resources = container.resources.as_ref().unwrap();
    assert!(resources.requests.as_ref().unwrap().contains_key("memory"));
    assert!(resources.limits.as_ref().unwrap().contains_key("memory"));
    assert!(pod.host_network.is_none() && pod.host_pid.is_none());
}

#[test]
fn the_network_policy_admits_the_caches_namespace_and_ocifits_only() {
    let desired = made(&cache(json!({}))).unwrap().unwrap();
    let policy = desired.network_policy.spec.as_ref().unwrap();
    assert_eq!(policy.policy_types, Some(vec!["Ingress".to_string()]));
    let selected = policy.pod_selector.as_ref().unwrap().match_labels.clone();
    assert_eq!(selected, desired.service.spec.as_ref().unwrap().selector);
    let rules = policy.ingress.as_ref().unwrap();
    assert_eq!(rules.len(), 1);
    let namespaces: Vec<String> = rules[0]
        .from
        .iter()
        .flatten()
        .map(|peer| {
            assert!(peer.pod_selector.is_none() && peer.ip_block.is_none());
            let labels = peer
                .namespace_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref();
            labels.unwrap()["kubernetes.io/metadata.name"].clone()
        })
        .collect();
    assert_eq!(namespaces, ["workflow", "ocifit-system"]);
    assert_eq!(
        rules[0].ports.as_ref().unwrap()[0].port,
        Some(IntOrString::Int(5000))
    );
}

#[test]
fn only_an_object_the_cache_controls_is_its_own() {
    let cache = cache(json!({}));
    let ours = made(&cache).unwrap().unwrap().service.metadata;
    assert!(owned_by(&ours, &cache));
    let unowned = ObjectMeta {
        name: Some("oras-registry".into()),
        ..ObjectMeta::default()
    };
    assert!(!owned_by(&unowned, &cache));
    let mut other_cache = ours.clone();
    other_cache.owner_references.as_mut().unwrap()[0].uid = "another-uid".into();
    assert!(!owned_by(&other_cache, &cache), "a namesake's, recreated");
    let mut not_controller = ours;
    not_controller.owner_references.as_mut().unwrap()[0].controller = None;
    assert!(!owned_by(&not_controller, &cache));
}

#[test]
fn only_listed_images_are_deployed() {
    let allowed = vec![DEFAULT_REGISTRY_IMAGE.to_string()];
    assert_eq!(image(&cache(json!({}))), DEFAULT_REGISTRY_IMAGE);
    assert!(image_allowed(&image(&cache(json!({}))), &allowed));
    let other = cache(json!({"image": "evil.example/miner:latest"}));
    assert!(!image_allowed(&image(&other), &allowed));
    assert!(
        !image_allowed("docker.io/library/registry:3.0.0-evil", &allowed),
        "compared exactly"
    );
}

#[test]
fn env_secrets_become_the_registrys_environment_in_order_below_ocifits_own() {
    let desired = made(&cache(
        json!({"envSecretRefs": [{"name": "registry-env"}, {"name": "registry-http"}]}),
    ))
    .unwrap()
    .unwrap();
    let container = registry_container(&desired);
    let from: Vec<&str> = container
        .env_from
        .iter()
        .flatten()
        .map(|source| source.secret_ref.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(from, ["registry-env", "registry-http"]);
    // What ocifit sets stays in `env`, which the kubelet lets win over `envFrom`.
    assert_eq!(env(container)["REGISTRY_STORAGE_DELETE_ENABLED"], "false");
}

#[test]
fn a_cache_without_env_secrets_has_no_env_from() {
    let desired = made(&cache(json!({}))).unwrap().unwrap();
    assert_eq!(registry_container(&desired).env_from, None);
}
