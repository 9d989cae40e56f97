//! Every container and volume the planner injects passes Pod Security `restricted`, whatever the
//! step's pod says of itself; a step that is restricted stays restricted once injected. The rules
//! are those the apiserver's `restricted` level enforces (Kubernetes 1.36), plus ocifit's own:
//! every injected container states its resources.

use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, Volume};

use super::super::helpers::HELPER_USER;
use super::*;

/// Why `container` of a pod with `pod` as its security context breaks `restricted`, if it does.
fn restricted_violations(container: &Container, pod: Option<&PodSecurityContext>) -> Vec<String> {
    let own = container.security_context.clone().unwrap_or_default();
    let mut broken = Vec::new();
    if own.privileged == Some(true) {
        broken.push("privileged".to_string());
    }
    if own.allow_privilege_escalation != Some(false) {
        broken.push("allowPrivilegeEscalation is not false".into());
    }
    let capabilities = own.capabilities.clone().unwrap_or_default();
    if !capabilities.drop.iter().flatten().any(|c| c == "ALL") {
        broken.push("capabilities do not drop ALL".into());
    }
    if capabilities
        .add
        .iter()
        .flatten()
        .any(|c| c != "NET_BIND_SERVICE")
    {
        broken.push(format!("capabilities add {:?}", capabilities.add));
    }
    let non_root = own
        .run_as_non_root
        .or_else(|| pod.and_then(|p| p.run_as_non_root));
    if non_root != Some(true) {
        broken.push("runAsNonRoot is not true".into());
    }
    let user = own.run_as_user.or_else(|| pod.and_then(|p| p.run_as_user));
    if user == Some(0) {
        broken.push("runAsUser is 0".into());
    }
    let seccomp = own
        .seccomp_profile
        .clone()
        .or_else(|| pod.and_then(|p| p.seccomp_profile.clone()));
    if !seccomp.is_some_and(|s| s.type_ == "RuntimeDefault" || s.type_ == "Localhost") {
        broken.push("no RuntimeDefault or Localhost seccomp profile".into());
    }
    broken
}

/// ocifit's own rule for what it injects: requests and limits of CPU and memory.
fn states_resources(container: &Container) -> bool {
    let resources = container.resources.clone().unwrap_or_default();
    ["cpu", "memory"].iter().all(|r| {
        resources
            .requests
            .as_ref()
            .is_some_and(|q| q.contains_key(*r))
            && resources
                .limits
                .as_ref()
                .is_some_and(|q| q.contains_key(*r))
    })
}

fn restricted_volume(volume: &Volume) -> bool {
    volume.host_path.is_none()
        && (volume.empty_dir.is_some()
            || volume.config_map.is_some()
            || volume.secret.is_some()
            || volume.persistent_volume_claim.is_some()
            || volume.projected.is_some()
            || volume.downward_api.is_some()
            || volume.csi.is_some()
            || volume.ephemeral.is_some())
}

fn injected(spec: &PodSpec) -> Vec<&Container> {
    spec.init_containers
        .iter()
        .flatten()
        .filter(|c| c.name == PREPARE || c.name == PUSH)
        .collect()
}

/// A step with inputs, outputs, a pipe and credentials: every helper there is.
fn full_step() -> Value {
    let mut object = pod(&[
        ("input-uri", "w/in:v1"),
        ("input-path", "/in"),
        ("output-uri", "w/out:v1"),
        ("output-path", "out"),
        ("output-pipe", "out/log.txt"),
        ("oras-env", "creds"),
    ]);
    object["metadata"]["namespace"] = json!("workflow");
    object
}

#[test]
fn every_injected_container_passes_restricted_whatever_the_pod_says() {
    // A pod that says nothing of its security: the helpers must carry it all themselves.
    let (pod, _) = admitted(&full_step());
    let spec = pod.spec.as_ref().unwrap();
    let helpers = injected(spec);
    assert_eq!(helpers.len(), 2, "both helpers are injected");
    for helper in helpers {
        let broken = restricted_violations(helper, None);
        assert!(broken.is_empty(), "{}: {broken:?}", helper.name);
        assert!(
            states_resources(helper),
            "{}: {:?}",
            helper.name,
            helper.resources
        );
        assert_eq!(
            helper.security_context.as_ref().unwrap().run_as_user,
            Some(HELPER_USER),
            "{}: a user of its own, not the image's say",
            helper.name
        );
    }
    for volume in spec.volumes.iter().flatten() {
        assert!(restricted_volume(volume), "{volume:?}");
    }
}

#[test]
fn a_restricted_step_stays_restricted_once_injected() {
    let mut object = full_step();
    object["spec"]["securityContext"] = json!({
        "runAsNonRoot": true,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"}
    });
    object["spec"]["containers"][0]["securityContext"] = json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]}
    });
    let before: Pod = serde_json::from_value(object.clone()).unwrap();
    let spec = before.spec.as_ref().unwrap();
    let pod_security = spec.security_context.as_ref();
    assert!(restricted_violations(&spec.containers[0], pod_security).is_empty());

    let (pod, _) = admitted(&object);
    let spec = pod.spec.as_ref().unwrap();
    let pod_security = spec.security_context.as_ref();
    for container in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        let broken = restricted_violations(container, pod_security);
        assert!(broken.is_empty(), "{}: {broken:?}", container.name);
    }
    for helper in injected(spec) {
        assert_eq!(
            helper.security_context.as_ref().unwrap().run_as_user,
            None,
            "{}: the pod's user (1000) applies, so the step can read what it writes",
            helper.name
        );
    }
    for volume in spec.volumes.iter().flatten() {
        assert!(restricted_volume(volume), "{volume:?}");
    }
}

#[test]
fn a_step_running_as_root_gets_helpers_that_do_not() {
    for (pod_user, container_user) in [(Some(0), None), (None, Some(0)), (Some(1000), Some(0))] {
        let mut object = full_step();
        if let Some(user) = pod_user {
            object["spec"]["securityContext"] = json!({"runAsUser": user});
        }
        if let Some(user) = container_user {
            object["spec"]["containers"][0]["securityContext"] = json!({"runAsUser": user});
        }
        let (pod, _) = admitted(&object);
        let spec = pod.spec.as_ref().unwrap();
        for helper in injected(spec) {
            let broken = restricted_violations(helper, spec.security_context.as_ref());
            assert!(broken.is_empty(), "{}: {broken:?}", helper.name);
            assert_eq!(
                helper.security_context.as_ref().unwrap().run_as_user,
                Some(HELPER_USER)
            );
        }
    }
}
