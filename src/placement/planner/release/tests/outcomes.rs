//! Holding, releasing unconstrained, falling back and retrying.

use super::*;

#[test]
fn containers_with_no_common_platform_are_held_with_a_message_naming_them() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let pod = gated(&[("web", "w"), ("legacy", "l")]);
    let plan = plan_release(
        &pod,
        &[
            inspected("web", &["linux/amd64"]),
            inspected("legacy", &["linux/s390x"]),
        ],
        context(&policy, &none, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Held));
    assert_eq!(
        plan.requeue,
        Some(crate::placement::planner::failure::LONGEST_RETRY)
    );
    assert!(gate_names(&plan.pod).contains(&SCHEDULING_GATE));
    assert_eq!(annotation(&plan.pod, OUTCOME_ANNOTATION), Some("Held"));
    let event = &plan.events[0];
    assert!(event.warning);
    assert_eq!(event.reason, "PlacementHeld");
    assert_eq!(
        event.message,
        "no platform suits every container: web runs on linux/amd64; legacy runs on linux/s390x"
    );
}

#[test]
fn with_release_chosen_no_common_platform_removes_the_gate_and_constrains_nothing() {
    let policy = arm_pool_policy(json!({"onNoCommonPlatform": "Release"}));
    let none = BTreeSet::new();
    let pod = gated(&[("web", "w"), ("legacy", "l")]);
    let plan = plan_release(
        &pod,
        &[
            inspected("web", &["linux/amd64"]),
            inspected("legacy", &["linux/s390x"]),
        ],
        context(&policy, &none, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Unconstrained));
    assert_eq!(gate_names(&plan.pod), ["example.com/quota"]);
    assert_eq!(plan.pod.spec.as_ref().unwrap().affinity, None);
    assert!(
        plan.events[0]
            .message
            .contains("onNoCommonPlatform: Release")
    );
}

#[test]
fn a_failed_inspection_below_the_bound_records_the_attempt_and_retries() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let pod = gated(&[("web", "w"), ("metrics", "m")]);
    let error =
        "failed to reach the registry for registry.example.com/metrics:v1: connection refused";
    let plan = plan_release(
        &pod,
        &[inspected("web", &["linux/amd64"]), failed("metrics", error)],
        context(&policy, &none, 1),
    );
    assert_eq!(plan.outcome, None);
    assert_eq!(plan.requeue, Some(Duration::from_secs(1)));
    assert_eq!(annotation(&plan.pod, ATTEMPTS_ANNOTATION), Some("1"));
    assert!(gate_names(&plan.pod).contains(&SCHEDULING_GATE));
    let event = &plan.events[0];
    assert_eq!(event.reason, "InspectionFailed");
    assert!(
        event.message.contains(&format!(
            "container metrics: image registry.example.com/metrics:v1: {error}"
        )),
        "{}",
        event.message
    );
    assert!(
        event.message.contains("attempt 1 of at least 5"),
        "{}",
        event.message
    );
}

fn exhausted(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    pod.metadata.annotations = Some(crate::placement::fixtures::map(&[(
        ATTEMPTS_ANNOTATION,
        "4",
    )]));
    pod
}

#[test]
fn giving_up_releases_unconstrained_by_default() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let pod = exhausted(&gated(&[("web", "w")]));
    let plan = plan_release(
        &pod,
        &[failed("web", "tag not found")],
        context(&policy, &none, 600),
    );
    assert_eq!(plan.outcome, Some(Outcome::Unconstrained));
    assert_eq!(gate_names(&plan.pod), ["example.com/quota"]);
    assert_eq!(annotation(&plan.pod, ATTEMPTS_ANNOTATION), Some("5"));
    assert_eq!(plan.events[0].reason, "ReleasedUnconstrained");
    assert!(plan.events[0].message.contains(
        "after 5 attempts: container web: image registry.example.com/web:v1: tag not found"
    ));
}

#[test]
fn giving_up_with_fallback_constrains_to_the_fallback_architecture_and_its_settings() {
    let policy = arm_pool_policy(json!({
        "onInspectionFailure": {"action": "Fallback", "fallbackArchitecture": "arm64"}
    }));
    let none = BTreeSet::new();
    let pod = exhausted(&gated(&[("web", "w")]));
    let plan = plan_release(
        &pod,
        &[failed("web", "unauthorized")],
        context(&policy, &none, 600),
    );
    assert_eq!(plan.outcome, Some(Outcome::Fallback));
    assert_eq!(
        required_terms(&plan.pod),
        [exprs(vec![req("kubernetes.io/arch", "In", &["arm64"])])]
    );
    assert_eq!(tolerations(&plan.pod)[0].key.as_deref(), Some("pool"));
    assert_eq!(annotation(&plan.pod, OUTCOME_ANNOTATION), Some("Fallback"));
    assert_eq!(plan.events[0].reason, "FallbackArchitecture");
}

#[test]
fn giving_up_with_hold_keeps_the_gate_and_keeps_trying() {
    let policy = arm_pool_policy(json!({"onInspectionFailure": {"action": "Hold"}}));
    let none = BTreeSet::new();
    let pod = exhausted(&gated(&[("web", "w")]));
    let plan = plan_release(
        &pod,
        &[failed("web", "registry down")],
        context(&policy, &none, 600),
    );
    assert_eq!(plan.outcome, Some(Outcome::Held));
    assert_eq!(
        plan.requeue,
        Some(crate::placement::planner::failure::LONGEST_RETRY)
    );
    assert!(gate_names(&plan.pod).contains(&SCHEDULING_GATE));
}

#[test]
fn platforms_across_operating_systems_narrow_to_linux_unless_the_pod_names_its_os() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let inspections = [inspected(
        "web",
        &["linux/amd64", "linux/arm64", "windows/amd64"],
    )];
    let plan_linux = plan_release(
        &gated(&[("web", "w")]),
        &inspections,
        context(&policy, &none, 3),
    );
    assert_eq!(
        annotation(&plan_linux.pod, PLATFORMS_ANNOTATION),
        Some("linux/amd64,linux/arm64")
    );

    let mut windows = gated(&[("web", "w")]);
    windows.spec.as_mut().unwrap().os = Some(PodOS {
        name: "windows".into(),
    });
    let plan_windows = plan_release(&windows, &inspections, context(&policy, &none, 3));
    assert_eq!(
        annotation(&plan_windows.pod, PLATFORMS_ANNOTATION),
        Some("windows/amd64")
    );
    assert_eq!(
        required_terms(&plan_windows.pod),
        [exprs(vec![
            req("kubernetes.io/arch", "In", &["amd64"]),
            req("kubernetes.io/os", "In", &["windows"]),
        ])]
    );

    let square = [inspected("web", &["linux/amd64", "windows/amd64"])];
    let plan_both = plan_release(&gated(&[("web", "w")]), &square, context(&policy, &none, 3));
    assert_eq!(
        annotation(&plan_both.pod, PLATFORMS_ANNOTATION),
        Some("linux/amd64,windows/amd64"),
        "os × arch is exactly the set: both kept"
    );
}

#[test]
fn a_pod_naming_an_os_its_containers_do_not_share_is_held_saying_so() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let mut windows = gated(&[("web", "w")]);
    windows.spec.as_mut().unwrap().os = Some(PodOS {
        name: "windows".into(),
    });
    let plan = plan_release(
        &windows,
        &[inspected("web", &["linux/amd64"])],
        context(&policy, &none, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Held));
    let message = &plan.events[0].message;
    assert!(
        message.contains(
            "the pod asks for spec.os.name windows, but its containers share only linux/amd64"
        ),
        "{message}"
    );
}

#[test]
fn init_containers_count_and_ephemeral_containers_do_not() {
    let mut pod = gated(&[("web", "w")]);
    let spec = pod.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![k8s_openapi::api::core::v1::Container {
        name: "setup".into(),
        image: Some("s".into()),
        ..Default::default()
    }]);
    spec.ephemeral_containers = Some(vec![k8s_openapi::api::core::v1::EphemeralContainer {
        name: "debug".into(),
        image: Some("d".into()),
        ..Default::default()
    }]);
    let names: Vec<&str> = containers(pod.spec.as_ref().unwrap())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["setup", "web"]);
}

#[test]
fn when_linux_is_excluded_by_the_pods_own_terms_another_shared_os_is_used() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let mut pod = gated(&[("web", "w")]);
    pod.spec.as_mut().unwrap().affinity = Some(required(vec![exprs(vec![req(
        "kubernetes.io/arch",
        "In",
        &["arm64"],
    )])]));
    let inspections = [inspected("web", &["linux/amd64", "windows/arm64"])];
    let plan = plan_release(&pod, &inspections, context(&policy, &none, 3));
    assert_eq!(plan.outcome, Some(Outcome::Constrained));
    assert_eq!(
        annotation(&plan.pod, PLATFORMS_ANNOTATION),
        Some("windows/arm64")
    );
}

/// `pod` with each named container's `imagePullPolicy` set.
fn with_pull_policies(mut pod: Pod, policies: &[(&str, &str)]) -> Pod {
    let spec = pod.spec.as_mut().unwrap();
    for container in spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
    {
        if let Some((_, policy)) = policies.iter().find(|(name, _)| *name == container.name) {
            container.image_pull_policy = Some((*policy).into());
        }
    }
    pod
}

#[test]
fn containers_that_never_pull_their_image_are_not_inspected() {
    let mut pod = gated(&[("web", "w"), ("local-agent", "a"), ("metrics", "m")]);
    pod.spec.as_mut().unwrap().init_containers = Some(vec![
        k8s_openapi::api::core::v1::Container {
            name: "preloaded".into(),
            image: Some("p".into()),
            ..Default::default()
        },
        k8s_openapi::api::core::v1::Container {
            name: "setup".into(),
            image: Some("s".into()),
            ..Default::default()
        },
    ]);
    let pod = with_pull_policies(
        pod,
        &[
            ("preloaded", "Never"),
            ("setup", "Always"),
            ("web", "IfNotPresent"),
            ("local-agent", "Never"),
        ],
    );
    let names: Vec<&str> = containers(pod.spec.as_ref().unwrap())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["setup", "web", "metrics"]);
    assert_eq!(crate::placement::planner::retries::images(&pod), "s\nw\nm");
}

#[test]
fn a_pod_whose_containers_all_never_pull_is_released_without_a_constraint_or_a_warning() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let pod = with_pull_policies(
        gated(&[("web", "w"), ("agent", "a")]),
        &[("web", "Never"), ("agent", "Never")],
    );
    assert_eq!(containers(pod.spec.as_ref().unwrap()).count(), 0);

    let plan = plan_release(&pod, &[], context(&policy, &none, 3));

    assert_eq!(plan.outcome, Some(Outcome::Unconstrained));
    assert_eq!(gate_names(&plan.pod), ["example.com/quota"]);
    assert_eq!(plan.pod.spec.as_ref().unwrap().affinity, None);
    assert!(tolerations(&plan.pod).is_empty());
    assert_eq!(plan.requeue, None);
    let event = &plan.events[0];
    assert!(!event.warning);
    assert_eq!(event.reason, "ReleasedUnconstrained");
    assert!(
        event.message.contains("imagePullPolicy: Never"),
        "{event:?}"
    );
}
