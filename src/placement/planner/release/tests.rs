use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PodOS, PodSchedulingGate, Toleration};
use serde_json::json;

use super::*;
use crate::api::placement_pod::{
    DIGESTS_ANNOTATION, MESSAGE_ANNOTATION, OUTCOME_ANNOTATION, PLATFORMS_ANNOTATION,
    SCHEDULING_GATE, TAINT_KEY,
};
use crate::placement::fixtures::{gate_names, inspected, pod, policy};
use ocifit_testkit::affinity::{exprs, req, required};

mod labels;
mod outcomes;
mod property;

fn gated(containers: &[(&str, &str)]) -> Pod {
    let mut pod = pod(containers);
    pod.spec.as_mut().unwrap().scheduling_gates = Some(vec![
        PodSchedulingGate {
            name: "example.com/quota".into(),
        },
        PodSchedulingGate {
            name: SCHEDULING_GATE.into(),
        },
    ]);
    pod
}

fn failed(container: &str, summary: &str) -> Inspection {
    let image = format!("registry.example.com/{container}:v1");
    Inspection {
        container: container.into(),
        image: image.clone(),
        result: Err(InspectionFailure::Lookup {
            image,
            summary: summary.into(),
        }),
    }
}

fn arm_pool_policy(extra: serde_json::Value) -> Policy {
    let mut spec = json!({
        "architectures": [
            {"name": "arm64", "weight": 50, "tolerations": [{"key": "pool", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}]},
            {"name": "amd64", "weight": 10}
        ]
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    policy("default", spec)
}

fn context<'a>(policy: &'a Policy, tainted: &'a BTreeSet<String>, since: u64) -> ReleaseInputs<'a> {
    ReleaseInputs {
        policy,
        tainted,
        since_creation: Duration::from_secs(since),
    }
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn required_terms(pod: &Pod) -> Vec<k8s_openapi::api::core::v1::NodeSelectorTerm> {
    pod.spec
        .as_ref()
        .unwrap()
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default()
}

fn tolerations(pod: &Pod) -> Vec<Toleration> {
    pod.spec
        .as_ref()
        .unwrap()
        .tolerations
        .clone()
        .unwrap_or_default()
}

#[test]
fn an_arm64_only_sidecar_releases_the_pod_onto_arm64_with_its_settings_in_one_update() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let pod = gated(&[("web", "w"), ("metrics", "m")]);
    let plan = plan_release(
        &pod,
        &[
            inspected("web", &["linux/amd64", "linux/arm64"]),
            inspected("metrics", &["linux/arm64"]),
        ],
        context(&policy, &none, 3),
    );

    assert_eq!(plan.outcome, Some(Outcome::Constrained));
    assert_eq!(plan.requeue, None);
    let released = &plan.pod;
    assert_eq!(
        gate_names(released),
        ["example.com/quota"],
        "only ocifit's gate is removed"
    );
    assert_eq!(
        required_terms(released),
        [exprs(vec![
            req("kubernetes.io/arch", "In", &["arm64"]),
            req("kubernetes.io/os", "In", &["linux"]),
        ])]
    );
    let preferred = released
        .spec
        .as_ref()
        .unwrap()
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .preferred_during_scheduling_ignored_during_execution
        .clone()
        .unwrap();
    assert_eq!(
        preferred.len(),
        1,
        "amd64's preference is not added: the pod cannot run there"
    );
    assert_eq!(preferred[0].weight, 50);
    assert_eq!(tolerations(released)[0].key.as_deref(), Some("pool"));
    assert_eq!(
        annotation(released, OUTCOME_ANNOTATION),
        Some("Constrained")
    );
    assert_eq!(
        annotation(released, PLATFORMS_ANNOTATION),
        Some("linux/arm64")
    );
    assert_eq!(
        annotation(released, DIGESTS_ANNOTATION),
        Some(r#"{"metrics":"sha256:metrics","web":"sha256:web"}"#)
    );
    assert_eq!(plan.events.len(), 1);
    assert_eq!(plan.events[0].reason, "Placed");
    assert!(!plan.events[0].warning);
    assert!(
        plan.events[0]
            .message
            .contains("every container runs on linux/arm64")
    );

    // Nothing else of the spec changed.
    let mut rest = released.spec.clone().unwrap();
    let mut before = pod.spec.clone().unwrap();
    for spec in [&mut rest, &mut before] {
        spec.affinity = None;
        spec.tolerations = None;
        spec.scheduling_gates = None;
    }
    assert_eq!(rest, before);
}

#[test]
fn a_pod_whose_images_list_aarch64_lands_on_arm64_nodes_with_the_arm64_settings() {
    // The policy spells the architecture as uname does; the images as their indexes do.
    let policy = policy(
        "default",
        json!({"architectures": [
            {"name": "aarch64", "weight": 50, "tolerations": [{"key": "pool", "operator": "Exists"}]}
        ]}),
    );
    let tainted = BTreeSet::from(["arm64".to_owned()]);
    let pod = gated(&[("web", "w"), ("metrics", "m")]);
    let plan = plan_release(
        &pod,
        &[
            inspected("web", &["linux/aarch64", "linux/s390x"]),
            inspected("metrics", &["linux/arm64/v8", "linux/x86_64"]),
        ],
        context(&policy, &tainted, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Constrained));
    assert_eq!(
        required_terms(&plan.pod),
        [exprs(vec![
            req("kubernetes.io/arch", "In", &["arm64"]),
            req("kubernetes.io/os", "In", &["linux"]),
        ])]
    );
    assert_eq!(
        annotation(&plan.pod, PLATFORMS_ANNOTATION),
        Some("linux/arm64")
    );
    let keys: Vec<Option<String>> = tolerations(&plan.pod).into_iter().map(|t| t.key).collect();
    assert_eq!(keys, [Some("pool".to_owned()), Some(TAINT_KEY.to_owned())]);
}

#[test]
fn each_of_the_users_terms_gets_the_platform_requirement_and_no_term_is_added() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let mut pod = gated(&[("web", "w")]);
    pod.spec.as_mut().unwrap().affinity = Some(required(vec![
        exprs(vec![req("zone", "In", &["a"])]),
        exprs(vec![req("kubernetes.io/arch", "In", &["amd64", "s390x"])]),
    ]));
    let plan = plan_release(
        &pod,
        &[inspected("web", &["linux/amd64", "linux/arm64"])],
        context(&policy, &none, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Constrained));
    let platform = |values: &[&str]| req("kubernetes.io/arch", "In", values);
    assert_eq!(
        required_terms(&plan.pod),
        [
            exprs(vec![
                req("zone", "In", &["a"]),
                platform(&["amd64", "arm64"]),
                req("kubernetes.io/os", "In", &["linux"]),
            ]),
            exprs(vec![
                platform(&["amd64", "s390x"]),
                platform(&["amd64", "arm64"]),
                req("kubernetes.io/os", "In", &["linux"]),
            ]),
        ]
    );
}

#[test]
fn a_user_requirement_outside_every_shared_platform_holds_the_pod_with_the_reason() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let mut pod = gated(&[("web", "w")]);
    pod.spec.as_mut().unwrap().node_selector = Some(crate::placement::fixtures::map(&[(
        "kubernetes.io/arch",
        "s390x",
    )]));
    let plan = plan_release(
        &pod,
        &[inspected("web", &["linux/amd64", "linux/arm64"])],
        context(&policy, &none, 3),
    );
    assert_eq!(plan.outcome, Some(Outcome::Held));
    assert_eq!(
        gate_names(&plan.pod),
        ["example.com/quota", SCHEDULING_GATE]
    );
    let message = annotation(&plan.pod, MESSAGE_ANNOTATION).unwrap();
    assert!(
        message.contains("nodeSelector {kubernetes.io/arch=s390x}"),
        "{message}"
    );
    assert!(message.contains("linux/amd64,linux/arm64"), "{message}");
    assert_eq!(
        plan.pod.spec.as_ref().unwrap().affinity,
        None,
        "held pods keep their spec"
    );
}

#[test]
fn tolerations_for_ocifits_taint_are_added_only_for_tainted_architectures_the_pod_runs_on() {
    let policy = arm_pool_policy(json!({}));
    let tainted = BTreeSet::from(["arm64".to_owned(), "s390x".to_owned()]);
    let pod = gated(&[("web", "w")]);
    let plan = plan_release(
        &pod,
        &[inspected("web", &["linux/amd64", "linux/arm64"])],
        context(&policy, &tainted, 3),
    );
    let ours: Vec<Toleration> = tolerations(&plan.pod)
        .into_iter()
        .filter(|t| t.key.as_deref() == Some(TAINT_KEY))
        .collect();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].value.as_deref(), Some("arm64"));
    assert_eq!(ours[0].effect.as_deref(), Some("NoSchedule"));
}

#[test]
fn a_pods_own_tolerations_and_preferences_are_kept_and_never_repeated() {
    let policy = arm_pool_policy(json!({}));
    let none = BTreeSet::new();
    let pod = gated(&[("web", "w")]);
    let inspections = [inspected("web", &["linux/arm64"])];
    let once = plan_release(&pod, &inspections, context(&policy, &none, 3)).pod;
    let mut regated = once.clone();
    regated.spec.as_mut().unwrap().scheduling_gates = Some(vec![PodSchedulingGate {
        name: SCHEDULING_GATE.into(),
    }]);
    let twice = plan_release(&regated, &inspections, context(&policy, &none, 3)).pod;
    assert_eq!(
        twice.spec.as_ref().unwrap().affinity,
        once.spec.as_ref().unwrap().affinity
    );
    assert_eq!(tolerations(&twice), tolerations(&once));
}

#[test]
fn a_pod_whose_policy_is_gone_is_released_unconstrained_keeping_other_gates() {
    let pod = gated(&[("web", "nginx")]);
    let plan = without_policy(&pod, "placement policy arm no longer exists");
    assert_eq!(plan.outcome, Some(Outcome::Unconstrained));
    assert_eq!(gate_names(&plan.pod), vec!["example.com/quota"]);
    assert_eq!(
        annotation(&plan.pod, MESSAGE_ANNOTATION),
        Some("placement policy arm no longer exists; released without a platform constraint")
    );
    assert!(required_terms(&plan.pod).is_empty());
    assert_eq!(plan.events[0].reason, "ReleasedUnconstrained");
}
