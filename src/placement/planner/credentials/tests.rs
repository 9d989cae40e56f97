use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::core::ObjectMeta;

use super::*;
use crate::registry::parse_reference;

fn docker_secret(name: &str, type_: &str, key: &str, config: &serde_json::Value) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        type_: Some(type_.into()),
        data: Some(BTreeMap::from([(
            key.to_owned(),
            ByteString(config.to_string().into_bytes()),
        )])),
        ..Secret::default()
    }
}

fn auth(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

fn secrets(list: Vec<Secret>) -> BTreeMap<String, Secret> {
    list.into_iter()
        .map(|secret| (secret.metadata.name.clone().unwrap(), secret))
        .collect()
}

fn basic(user: &str, password: &str) -> Credentials {
    Credentials::Basic {
        username: user.into(),
        password: password.into(),
    }
}

#[test]
fn credentials_come_in_the_order_pod_secrets_then_service_account_then_operator() {
    let read = secrets(vec![
        docker_secret(
            "pod-cred",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            &serde_json::json!({"auths": {"registry.example.com": {"auth": auth("pod", "p1")}}}),
        ),
        docker_secret(
            "sa-cred",
            "kubernetes.io/dockercfg",
            ".dockercfg",
            &serde_json::json!({"registry.example.com": {"auth": auth("sa", "p2")}}),
        ),
    ]);
    let operator = DockerConfig::from_json(
        serde_json::json!({"auths": {"registry.example.com": {"auth": auth("op", "p3")}}})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    let pull = PullSecrets::read(["pod-cred", "sa-cred", "pod-cred"], &read);
    let image = parse_reference("registry.example.com/team/app:v1").unwrap();
    assert_eq!(
        pull.for_image(&image, Some(&operator)),
        [basic("pod", "p1"), basic("sa", "p2"), basic("op", "p3")]
    );
    assert!(pull.problems.is_empty());
}

#[test]
fn an_image_no_secret_covers_is_read_anonymously() {
    let read = secrets(vec![docker_secret(
        "pod-cred",
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        &serde_json::json!({"auths": {"registry.example.com": {"auth": auth("pod", "p1")}}}),
    )]);
    let pull = PullSecrets::read(["pod-cred"], &read);
    let image = parse_reference("other.example.com/app:v1").unwrap();
    assert!(pull.for_image(&image, None).is_empty());
}

#[test]
fn the_same_credentials_twice_are_tried_once() {
    let config = serde_json::json!({"auths": {"registry.example.com": {"auth": auth("u", "p")}}});
    let read = secrets(vec![
        docker_secret(
            "a",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            &config,
        ),
        docker_secret(
            "b",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            &config,
        ),
    ]);
    let pull = PullSecrets::read(["a", "b"], &read);
    let image = parse_reference("registry.example.com/app:v1").unwrap();
    assert_eq!(pull.for_image(&image, None), [basic("u", "p")]);
}

#[test]
fn unusable_secrets_are_reported_and_skipped() {
    let read = secrets(vec![
        docker_secret(
            "opaque",
            "Opaque",
            ".dockerconfigjson",
            &serde_json::json!({}),
        ),
        docker_secret(
            "no-key",
            "kubernetes.io/dockerconfigjson",
            "config.json",
            &serde_json::json!({}),
        ),
        Secret {
            metadata: ObjectMeta {
                name: Some("garbage".into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/dockerconfigjson".into()),
            data: Some(BTreeMap::from([(
                ".dockerconfigjson".to_owned(),
                ByteString(b"not json".to_vec()),
            )])),
            ..Secret::default()
        },
    ]);
    let pull = PullSecrets::read(["missing", "opaque", "no-key", "garbage"], &read);
    let messages: Vec<String> = pull.problems.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(messages[0].contains("pull secret missing does not exist"));
    assert!(messages[1].contains("has type \"Opaque\""));
    assert!(messages[2].contains("no .dockerconfigjson key"));
    assert!(messages[3].contains("pull secret garbage is not a docker config"));
    let image = parse_reference("registry.example.com/app:v1").unwrap();
    assert!(pull.for_image(&image, None).is_empty());
}

#[test]
fn ocifits_own_credentials_are_for_policies_that_opt_in_only() {
    let own = DockerConfig::from_json(
        serde_json::json!({"auths": {"registry.example.com": {"auth": auth("op", "p3")}}})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    let image = parse_reference("registry.example.com/team/app:v1").unwrap();
    let pull = PullSecrets::default();
    let plain = crate::placement::fixtures::policy("plain", serde_json::json!({}));
    assert!(
        pull.for_image(&image, operator_credentials(&plain, &own))
            .is_empty(),
        "a policy that did not opt in reads anonymously"
    );
    let trusting = crate::placement::fixtures::policy(
        "trusting",
        serde_json::json!({"operatorCredentials": true}),
    );
    assert_eq!(
        pull.for_image(&image, operator_credentials(&trusting, &own)),
        [basic("op", "p3")]
    );
}
