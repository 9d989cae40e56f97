//! Which containers are rewritten: placeholders only, init containers when the policy says so,
//! ephemeral containers never.

use serde_json::json;

use super::fixtures::*;
use crate::api::pod::DECISION_IMAGES;

fn spec_with(extra: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({"nodeSelector": {"zone": "a"}, "containers": [
        {"name": "app", "image": PLACEHOLDER},
        {"name": "sidecar", "image": "envoy:1"},
        {"name": "worker", "image": PLACEHOLDER}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    spec
}

fn recorded(pod: &k8s_openapi::api::core::v1::Pod) -> serde_json::Value {
    serde_json::from_str(&annotation(pod, DECISION_IMAGES).unwrap()).unwrap()
}

#[test]
fn every_placeholder_container_is_replaced_and_only_those() {
    let index = index(&[resolved(policy("flavors", json!({})))]);
    let pod = simple_pod(json!({}), spec_with(json!({})));
    let after = patched(&pod, &plan(&index, &pod));
    assert_eq!(image_of(&after, "app"), "debian:11");
    assert_eq!(image_of(&after, "worker"), "debian:11");
    assert_eq!(image_of(&after, "sidecar"), "envoy:1");
    assert_eq!(
        recorded(&after),
        json!({"app": "debian:11", "worker": "debian:11"})
    );
}

#[test]
fn init_containers_are_replaced_only_when_the_policy_includes_them() {
    let init = json!({"initContainers": [{"name": "setup", "image": PLACEHOLDER}]});
    for (include, expected) in [(false, PLACEHOLDER), (true, "debian:11")] {
        let policy = resolved(policy("flavors", json!({"includeInitContainers": include})));
        let index = index(&[policy]);
        let pod = simple_pod(json!({}), spec_with(init.clone()));
        let after = patched(&pod, &plan(&index, &pod));
        assert_eq!(
            image_of(&after, "setup"),
            expected,
            "includeInitContainers: {include}"
        );
        assert_eq!(image_of(&after, "app"), "debian:11");
        let has_setup = recorded(&after).get("setup").is_some();
        assert_eq!(has_setup, include);
    }
}

#[test]
fn ephemeral_containers_are_never_touched() {
    let index = index(&[resolved(policy(
        "flavors",
        json!({"includeInitContainers": true}),
    ))]);
    let pod = simple_pod(
        json!({}),
        spec_with(json!({"ephemeralContainers": [{"name": "debug", "image": PLACEHOLDER}]})),
    );
    let after = patched(&pod, &plan(&index, &pod));
    let ephemeral = &after
        .spec
        .as_ref()
        .unwrap()
        .ephemeral_containers
        .as_ref()
        .unwrap()[0];
    assert_eq!(ephemeral.image.as_deref(), Some(PLACEHOLDER));
    assert!(recorded(&after).get("debug").is_none());
}
