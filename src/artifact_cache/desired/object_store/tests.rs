use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar};
use serde_json::json;

use super::super::Desired;
use super::super::fixtures::{self, GENERATED, cache, pod, registry_container};
use super::*;

fn s3(extra: serde_json::Value) -> serde_json::Value {
    let mut s3 = json!({
        "bucket": "artifacts",
        "endpoint": "http://10.1.2.3:8333",
        "credentialsSecretRef": {"name": "store-keys"}
    });
    for (key, value) in extra.as_object().unwrap() {
        s3[key] = value.clone();
    }
    s3
}

fn made(spec: serde_json::Value) -> Desired {
    fixtures::made(&cache(spec)).unwrap().unwrap()
}

fn env(container: &Container) -> BTreeMap<String, EnvVar> {
    let env = container.env.iter().flatten();
    env.map(|e| (e.name.clone(), e.clone())).collect()
}

fn value(env: &BTreeMap<String, EnvVar>, name: &str) -> String {
    env[name].value.clone().unwrap()
}

fn secret_ref(env: &BTreeMap<String, EnvVar>, name: &str) -> (String, String, Option<bool>) {
    let source = env[name].value_from.as_ref().unwrap();
    let key = source.secret_key_ref.as_ref().unwrap();
    (key.name.clone(), key.key.clone(), key.optional)
}

#[test]
fn an_s3_cache_runs_distributions_s3_driver_with_the_users_keys_by_reference() {
    let prefix = json!({"prefix": "/caches/team-a", "region": "eu-west-1", "forcePathStyle": true});
    let desired = made(json!({"storage": {"s3": s3(prefix)}}));
    let env = env(registry_container(&desired));
    assert_eq!(value(&env, "REGISTRY_STORAGE"), "s3");
    assert_eq!(value(&env, "REGISTRY_STORAGE_S3_BUCKET"), "artifacts");
    assert_eq!(value(&env, "REGISTRY_STORAGE_S3_REGION"), "eu-west-1");
    assert_eq!(
        value(&env, "REGISTRY_STORAGE_S3_REGIONENDPOINT"),
        "http://10.1.2.3:8333"
    );
    assert_eq!(value(&env, "REGISTRY_STORAGE_S3_FORCEPATHSTYLE"), "true");
    assert_eq!(value(&env, "REGISTRY_STORAGE_S3_SECURE"), "false");
    assert_eq!(
        value(&env, "REGISTRY_STORAGE_S3_ROOTDIRECTORY"),
        "/caches/team-a"
    );
    // ocifit never holds the store's keys: the kubelet puts them in the registry's environment.
    let keys = |name| secret_ref(&env, name);
    let access = ("store-keys".to_string(), "accessKey".to_string(), None);
    assert_eq!(keys("REGISTRY_STORAGE_S3_ACCESSKEY"), access);
    let secret = ("store-keys".to_string(), "secretKey".to_string(), None);
    assert_eq!(keys("REGISTRY_STORAGE_S3_SECRETKEY"), secret);
    // Blobs never leave through a redirect to the store; deletes stay off.
    assert_eq!(value(&env, "REGISTRY_STORAGE_REDIRECT_DISABLE"), "true");
    assert_eq!(value(&env, "REGISTRY_STORAGE_DELETE_ENABLED"), "false");
    // Two storage drivers would stop distribution at start.
    assert!(!env.contains_key("REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY"));
    let volumes: Vec<&str> = pod(&desired)
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["auth"]);
}

#[test]
fn the_users_key_names_are_the_ones_read() {
    let keys = json!({"credentialsSecretRef": {"name": "k", "accessKey": "id", "secretKey": "pw"}});
    let desired = made(json!({"storage": {"s3": s3(keys)}}));
    let env = env(registry_container(&desired));
    assert_eq!(secret_ref(&env, "REGISTRY_STORAGE_S3_ACCESSKEY").1, "id");
    assert_eq!(secret_ref(&env, "REGISTRY_STORAGE_S3_SECRETKEY").1, "pw");
}

#[test]
fn a_replica_is_ready_only_while_its_bucket_answers_the_health_check() {
    let desired = made(json!({"storage": {"s3": s3(json!({}))}}));
    let container = registry_container(&desired);
    let env = env(container);
    assert_eq!(value(&env, "REGISTRY_HEALTH_STORAGEDRIVER_ENABLED"), "true");
    let readiness = container.readiness_probe.as_ref().unwrap();
    let get = readiness.http_get.as_ref().unwrap();
    assert_eq!(get.path.as_deref(), Some("/"));
    assert_eq!(get.port, IntOrString::Int(5000));
    // A store outage leaves the Service; it restarts nothing.
    let liveness = container.liveness_probe.as_ref().unwrap();
    assert!(liveness.tcp_socket.is_some() && liveness.http_get.is_none());
}

#[test]
fn every_replica_signs_uploads_with_the_generated_http_secret() {
    let desired = made(json!({"storage": {"s3": s3(json!({}))}}));
    let shared = env(registry_container(&desired));
    let expected = (
        GENERATED.to_string(),
        HTTP_SECRET_KEY.to_string(),
        Some(true),
    );
    assert_eq!(secret_ref(&shared, "REGISTRY_HTTP_SECRET"), expected);
    // A cache with its own htpasswd brings its own: its envSecretRefs would lose to `env`.
    let own = made(json!({
        "storage": {"s3": s3(json!({}))},
        "htpasswdSecretRef": {"name": "users"}
    }));
    assert!(!env(registry_container(&own)).contains_key("REGISTRY_HTTP_SECRET"));
}

#[test]
fn replicas_roll_one_by_one_spread_over_nodes_with_a_budget() {
    let desired = made(json!({"replicas": 2, "storage": {"s3": s3(json!({}))}}));
    let spec = desired.deployment.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    let strategy = spec.strategy.as_ref().unwrap().type_.as_deref();
    assert_eq!(strategy, Some("RollingUpdate"));
    let spread = &pod(&desired).topology_spread_constraints.as_ref().unwrap()[0];
    assert_eq!(spread.topology_key, "kubernetes.io/hostname");
    assert_eq!(spread.max_skew, 1);
    let selector = spec.selector.match_labels.clone();
    assert_eq!(
        spread.label_selector.as_ref().unwrap().match_labels,
        selector
    );
    let budget = desired.disruption_budget.as_ref().unwrap();
    let budget_spec = budget.spec.as_ref().unwrap();
    assert_eq!(budget_spec.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(budget_spec.min_available, None);
    assert_eq!(
        budget_spec.selector.as_ref().unwrap().match_labels,
        selector
    );
    assert_eq!(budget.metadata.name.as_deref(), Some("oras-registry"));
    let owner = &budget.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        ("4f3c-uid", Some(true))
    );
}

#[test]
fn a_volume_cache_keeps_one_recreated_replica_without_budget_or_egress_rules() {
    let desired = made(json!({}));
    let spec = desired.deployment.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(1));
    let strategy = spec.strategy.as_ref().unwrap().type_.as_deref();
    assert_eq!(strategy, Some("Recreate"));
    assert!(desired.disruption_budget.is_none());
    assert!(pod(&desired).topology_spread_constraints.is_none());
    let policy = desired.network_policy.spec.as_ref().unwrap();
    assert_eq!(
        policy.policy_types.as_deref(),
        Some(&["Ingress".to_string()][..])
    );
    let env = env(registry_container(&desired));
    assert!(!env.contains_key("REGISTRY_STORAGE"));
    assert!(!env.contains_key("REGISTRY_HTTP_SECRET"));
}

#[test]
fn an_s3_registry_may_reach_its_endpoints_address_and_port_and_nothing_else() {
    let desired = made(json!({"storage": {"s3": s3(json!({}))}}));
    let policy = desired.network_policy.spec.as_ref().unwrap();
    let types = policy.policy_types.clone().unwrap();
    assert_eq!(types, ["Ingress", "Egress"]);
    let egress = policy.egress.as_ref().unwrap();
    assert_eq!(egress.len(), 1, "no DNS for an address: {egress:?}");
    let to = egress[0].to.as_ref().unwrap();
    assert_eq!(to[0].ip_block.as_ref().unwrap().cidr, "10.1.2.3/32");
    let ports = egress[0].ports.as_ref().unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].port, Some(IntOrString::Int(8333)));
}

#[test]
fn a_named_endpoint_opens_its_port_to_any_address_and_dns() {
    let named = json!({"endpoint": "https://s3.example.com"});
    let desired = made(json!({"storage": {"s3": s3(named)}}));
    let env = env(registry_container(&desired));
    assert_eq!(value(&env, "REGISTRY_STORAGE_S3_SECURE"), "true");
    let policy = desired.network_policy.spec.as_ref().unwrap();
    let egress = policy.egress.as_ref().unwrap();
    assert_eq!(egress.len(), 2);
    assert!(egress[0].to.is_none());
    let ports = |rule: &NetworkPolicyEgressRule| -> Vec<(Option<IntOrString>, Option<String>)> {
        let ports = rule.ports.iter().flatten();
        ports
            .map(|p| (p.port.clone(), p.protocol.clone()))
            .collect()
    };
    assert_eq!(
        ports(&egress[0]),
        [(Some(IntOrString::Int(443)), Some("TCP".into()))]
    );
    assert_eq!(
        ports(&egress[1]),
        [
            (Some(IntOrString::Int(53)), Some("UDP".into())),
            (Some(IntOrString::Int(53)), Some("TCP".into()))
        ]
    );
}

#[test]
fn a_ca_from_a_config_map_is_mounted_and_trusted_instead_of_the_images() {
    let ca = json!({"ca": {"configMapKeyRef": {"name": "store-ca", "key": "bundle.pem"}}});
    let desired = made(json!({"storage": {"s3": s3(ca)}}));
    let container = registry_container(&desired);
    let env = env(container);
    assert_eq!(value(&env, "SSL_CERT_FILE"), "/etc/ocifit/s3-ca/ca.crt");
    let volume = pod(&desired)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "s3-ca")
        .unwrap();
    let map = volume.config_map.as_ref().unwrap();
    assert_eq!(map.name, "store-ca");
    let item = &map.items.as_ref().unwrap()[0];
    assert_eq!(
        (item.key.as_str(), item.path.as_str()),
        ("bundle.pem", "ca.crt")
    );
    let mounts = container.volume_mounts.iter().flatten();
    let mount = mounts.into_iter().find(|m| m.name == "s3-ca").unwrap();
    assert_eq!(mount.mount_path, "/etc/ocifit/s3-ca");
    assert_eq!(mount.read_only, Some(true));
}

#[test]
fn a_ca_from_a_secret_is_mounted_from_the_secret() {
    let ca = json!({"ca": {"secretKeyRef": {"name": "store-tls", "key": "ca.crt"}}});
    let desired = made(json!({"storage": {"s3": s3(ca)}}));
    let volume = pod(&desired)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "s3-ca")
        .unwrap();
    let secret = volume.secret.as_ref().unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("store-tls"));
}

#[test]
fn endpoints_are_taken_apart_with_their_schemes_default_ports() {
    let parsed = |e: &str| endpoint(e).map(|e| (e.secure, e.host, e.port));
    assert_eq!(
        parsed("https://s3.example.com"),
        Some((true, "s3.example.com".into(), 443))
    );
    assert_eq!(
        parsed("http://minio.store:9000"),
        Some((false, "minio.store".into(), 9000))
    );
    assert_eq!(
        parsed("http://[fd00::5]:8333"),
        Some((false, "fd00::5".into(), 8333))
    );
    assert_eq!(
        parsed("http://[fd00::5]"),
        Some((false, "fd00::5".into(), 80))
    );
    for bad in [
        "s3.example.com",
        "ftp://x",
        "http://x:0",
        "http://x:99999",
        "http://",
        "http://x/path",
    ] {
        assert_eq!(parsed(bad), None, "{bad}");
    }
}
