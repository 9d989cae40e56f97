//! Holding and releasing: a pod admission cannot decide yet is held, never refused; its release
//! is the decision admission would have made, written against the held pod as the watch keeps
//! it; past the bound, or for a decision that would have refused it, the failure rule.

use std::time::Duration;

use ocifit_testkit::gates;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::pod::{HELD_ANNOTATION, HELD_LABEL, SCHEDULING_GATE};
use crate::image_selection::planner::managed::{is_managed, managed_name};
use crate::image_selection::planner::tests::fixtures::*;
use crate::image_selection::planner::tests::property::{FLAVORS, IMAGES, arb_nodes, arb_pod_spec};
use crate::image_selection::release::trim;

const RULES: HoldRules = HoldRules {
    bound: Duration::from_secs(300),
    failure: HoldFailure::Fail,
    take_charge: true,
    collect_after: Duration::from_secs(86_400),
    quota: crate::image_selection::planner::managed::Quota {
        per_namespace: 10,
        global: 100,
    },
};

fn apply(pod: &Pod, patch: &Patch) -> Pod {
    let mut value = serde_json::to_value(pod).unwrap();
    json_patch::patch(&mut value, patch).unwrap();
    serde_json::from_value(value).unwrap()
}

/// `pod` as admission holds it.
fn held(pod: &Pod, index: &Index) -> Pod {
    match index.plan_pod(pod) {
        ImagePlan::Hold { patch, .. } => apply(pod, &patch),
        other => panic!("expected a hold, got {other:?}"),
    }
}

/// `pod` as the release controller's watch stores it.
fn stored(pod: &Pod) -> Pod {
    let mut stored = pod.clone();
    trim(&mut stored);
    stored
}

fn label(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.labels.as_ref()?.get(key).cloned()
}

fn versioned(metadata: Value) -> Pod {
    let mut pod = simple_pod(metadata, json!({"nodeSelector": {"flavor": "vanilla"}}));
    pod.metadata.resource_version = Some("7".into());
    pod
}

#[test]
fn a_pod_of_a_policy_not_resolved_yet_is_held_with_the_gate_and_label_and_a_warning() {
    let index = index(&[policy("app", json!({}))]);
    let pod = versioned(json!({}));
    let plan = index.plan(&request(&pod, false));
    assert_eq!((plan.outcome(), plan.reason()), ("held", "PolicyNotReady"));
    let warning = &plan.warnings()[0];
    assert!(
        warning.starts_with(&format!("held by scheduling gate {SCHEDULING_GATE} until")),
        "{warning}"
    );
    assert!(
        warning.contains("ImageSelectionPolicy app is not ready"),
        "{warning}"
    );
    let after = held(&pod, &index);
    assert_eq!(gates(&after), [SCHEDULING_GATE]);
    assert_eq!(label(&after, HELD_LABEL).as_deref(), Some("true"));
    assert_eq!(image_of(&after, "app"), PLACEHOLDER);
    // Reinvoked on its own output, admission adds nothing.
    match index.plan_pod(&after) {
        ImagePlan::Hold { patch, .. } => assert!(patch.0.is_empty(), "{patch:?}"),
        other => panic!("expected a hold, got {other:?}"),
    }
}

#[test]
fn other_scheduling_gates_are_kept_when_held_and_when_released() {
    let unresolved = index(&[policy("app", json!({}))]);
    let mut pod = versioned(json!({}));
    pod.spec.as_mut().unwrap().scheduling_gates =
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: "example.com/other".into(),
        }]);
    let after = held(&pod, &unresolved);
    assert_eq!(gates(&after), ["example.com/other", SCHEDULING_GATE]);
    let resolved = index(&[resolved(policy("app", json!({})))]);
    let release = release(Some(&resolved), &stored(&after), RULES, Duration::ZERO);
    let released = apply(&after, release.patch.as_ref().unwrap());
    assert_eq!(gates(&released), ["example.com/other"]);
    assert_eq!(image_of(&released, "app"), "debian:11");
    assert_eq!(label(&released, HELD_LABEL), None);
}

#[test]
fn a_pod_naming_a_policy_this_replica_has_not_seen_or_created_before_any_index_is_held() {
    let index = index(&[]);
    let named = versioned(json!({"labels": {"oci.image.compatibilities.selection/policy": "new"}}));
    assert_eq!(index.plan_pod(&named).reason(), "PolicyNotFound");
    assert_eq!(index.plan_pod(&named).outcome(), "held");
    let by_ref = versioned(json!({"annotations":
        {"oci.image.compatibilities.selection/image-ref": "registry.example/x:v1"}}));
    assert_eq!(index.plan_pod(&by_ref).outcome(), "held");
    let waiting = release(
        None,
        &stored(&held(&named, &index)),
        RULES,
        Duration::from_secs(60),
    );
    assert_eq!(
        waiting,
        Release {
            patch: None,
            event: None,
            wait: Some(Duration::from_secs(240)),
            adopt: None,
        }
    );
}

#[test]
fn an_image_ref_no_policy_uses_gets_a_managed_policy_and_one_an_admin_wrote_wins_over_it() {
    let reference = "registry.example/app-compat:v1";
    let by_ref = versioned(json!({"annotations":
        {"oci.image.compatibilities.selection/image-ref": reference}}));
    let none = index(&[]);
    let held = held(&by_ref, &none);
    let waiting = release(Some(&none), &stored(&held), RULES, Duration::ZERO);
    let adopted = waiting.adopt.unwrap();
    assert_eq!(adopted.metadata.name, Some(managed_name(reference)));
    assert!(is_managed(&adopted));
    assert_eq!(adopted.spec.artifact.reference.as_deref(), Some(reference));
    assert_eq!(waiting.patch, None);
    let off = HoldRules {
        take_charge: false,
        ..RULES
    };
    assert_eq!(
        release(Some(&none), &stored(&held), off, Duration::ZERO).adopt,
        None
    );
    // Once resolved, the managed policy releases the pod with its class's image.
    let mut managed = adopted.clone();
    managed.status = resolved(policy("x", json!({}))).status;
    let with_managed = crate::image_selection::planner::tests::fixtures::index(&[managed.clone()]);
    let released = release(Some(&with_managed), &stored(&held), RULES, Duration::ZERO);
    let after = apply(&held, released.patch.as_ref().unwrap());
    assert_eq!(image_of(&after, "app"), "debian:11");
    assert_eq!(
        annotation(&after, "ocifit.io/policy"),
        Some(managed_name(reference))
    );
    // Another pod using the same placeholder but naming no artifact is not its to serve.
    let stranger = versioned(json!({}));
    assert_eq!(with_managed.plan_pod(&stranger).reason(), "NoPolicy");
    // An admin's policy on the same artifact wins over it.
    let mut written = resolved(policy("written", json!({})));
    written.spec.artifact.reference = Some(reference.into());
    let both = crate::image_selection::planner::tests::fixtures::index(&[managed, written]);
    match both.plan_pod(&by_ref) {
        ImagePlan::Patch { annotations, .. } => {
            assert_eq!(annotations["ocifit.io/policy"], "written");
        }
        other => panic!("expected a patch, got {other:?}"),
    }
}

#[test]
fn each_pod_naming_a_managed_policys_artifact_has_its_own_placeholder_replaced() {
    let reference = "registry.example/app-compat:v1";
    let by_ref = |namespace: &str, spec: Value| {
        let mut pod = simple_pod(
            json!({"namespace": namespace, "annotations":
                {"oci.image.compatibilities.selection/image-ref": reference}}),
            spec,
        );
        pod.metadata.resource_version = Some("7".into());
        pod
    };
    let first = by_ref("team-a", json!({"nodeSelector": {"flavor": "vanilla"}}));
    let none = index(&[]);
    let mut managed = release(
        Some(&none),
        &stored(&held(&first, &none)),
        RULES,
        Duration::ZERO,
    )
    .adopt
    .unwrap();
    assert_eq!(managed.spec.target_image, PLACEHOLDER);
    managed.status = resolved(policy("x", json!({}))).status;
    let with_managed = index(&[managed]);
    // Another tenant's pod: its placeholder is its first container's image; a container that
    // happens to run the first pod's placeholder is not its to have replaced.
    let other = by_ref(
        "team-b",
        json!({"nodeSelector": {"flavor": "vanilla"}, "containers": [
            {"name": "app", "image": "team-b/placeholder:1"},
            {"name": "tool", "image": PLACEHOLDER}]}),
    );
    let held_other = held(&other, &none);
    let released = release(
        Some(&with_managed),
        &stored(&held_other),
        RULES,
        Duration::ZERO,
    );
    let after = apply(&held_other, released.patch.as_ref().unwrap());
    assert_eq!(image_of(&after, "app"), "debian:11");
    assert_eq!(image_of(&after, "tool"), PLACEHOLDER);
}

#[test]
fn past_the_bound_fail_keeps_the_pod_held_once_with_an_event_and_the_reason() {
    let index = index(&[policy("app", json!({}))]);
    let pod = held(&versioned(json!({})), &index);
    let late = release(Some(&index), &stored(&pod), RULES, Duration::from_secs(300));
    let event = late.event.clone().unwrap();
    assert_eq!((event.warning, event.reason), (true, "HeldUndecided"));
    assert!(
        event.note.contains("no decision within 300s"),
        "{}",
        event.note
    );
    let marked = apply(&pod, late.patch.as_ref().unwrap());
    assert_eq!(gates(&marked), [SCHEDULING_GATE]);
    let why = annotation(&marked, HELD_ANNOTATION).unwrap();
    assert!(
        why.contains("ImageSelectionPolicy app is not ready"),
        "{why}"
    );
    // Already marked: nothing more, no Event repeated.
    let again = release(
        Some(&index),
        &stored(&marked),
        RULES,
        Duration::from_secs(900),
    );
    assert_eq!(
        (again.patch, again.event, again.wait, again.adopt),
        (None, None, None, None)
    );
    // The decision comes later: released, and the mark goes with the gate.
    let resolved = crate::image_selection::planner::tests::fixtures::index(&[resolved(policy(
        "app",
        json!({}),
    ))]);
    let late = release(
        Some(&resolved),
        &stored(&marked),
        RULES,
        Duration::from_secs(900),
    );
    let released = apply(&marked, late.patch.as_ref().unwrap());
    assert_eq!(gates(&released), Vec::<String>::new());
    assert_eq!(annotation(&released, HELD_ANNOTATION), None);
    assert_eq!(image_of(&released, "app"), "debian:11");
}

#[test]
fn past_the_bound_ignore_releases_the_pod_unchanged_with_a_warning() {
    let index = index(&[policy("app", json!({}))]);
    let original = versioned(json!({}));
    let pod = held(&original, &index);
    let rules = HoldRules {
        failure: HoldFailure::Ignore,
        ..RULES
    };
    let late = release(Some(&index), &stored(&pod), rules, Duration::from_secs(301));
    let event = late.event.unwrap();
    assert_eq!((event.warning, event.reason), (true, "ReleasedUndecided"));
    let released = apply(&pod, late.patch.as_ref().unwrap());
    assert_eq!(
        released.spec,
        original.spec.map(|spec| PodSpec {
            scheduling_gates: Some(Vec::new()),
            ..spec
        })
    );
    assert_eq!(released.metadata.labels, original.metadata.labels);
}

#[test]
fn a_decision_that_would_have_refused_the_held_pod_follows_the_failure_rule_at_once() {
    let unresolved = index(&[policy("app", json!({}))]);
    let pod = held(
        &simple_pod(json!({}), json!({"nodeSelector": {"flavor": "strawberry"}})),
        &unresolved,
    );
    let no_match = index(&[resolved(policy("app", json!({"onNoMatch": "Deny"})))]);
    let now = release(Some(&no_match), &stored(&pod), RULES, Duration::ZERO);
    let event = now.event.unwrap();
    assert_eq!(event.reason, "HeldUndecided");
    assert!(event.note.contains("no candidate image"), "{}", event.note);
}

#[test]
fn the_release_patch_carries_the_version_it_was_planned_from() {
    let index = index(&[resolved(policy("app", json!({})))]);
    let unresolved =
        crate::image_selection::planner::tests::fixtures::index(&[policy("app", json!({}))]);
    let mut pod = held(&versioned(json!({})), &unresolved);
    let patch = release(Some(&index), &stored(&pod), RULES, Duration::ZERO)
        .patch
        .unwrap();
    pod.metadata.resource_version = Some("8".into());
    assert_eq!(
        apply(&pod, &patch).metadata.resource_version.as_deref(),
        Some("7")
    );
}

use k8s_openapi::api::core::v1::PodSpec;

proptest! {
    /// One decision: for the same policies, nodes and pod, the pod admission would have patched
    /// and the pod the release patch leaves (held first, released from the trimmed copy the
    /// watch keeps) are the same pod, but for the emptied gate list.
    #[test]
    fn admission_and_release_give_the_same_pod_for_the_same_inputs(
        nodes in arb_nodes(),
        images in prop::collection::vec(0..IMAGES.len(), FLAVORS.len()),
        fallback in any::<bool>(),
        deny in any::<bool>(),
        spec in arb_pod_spec(),
        noise in prop::option::of("[a-z]{1,8}"),
    ) {
        let table: Vec<(&str, Option<&str>, i32)> = FLAVORS
            .iter()
            .zip(&images)
            .map(|(flavor, image)| (*flavor, IMAGES[*image], 1))
            .collect();
        let mut spec_json = json!({"onUnpinned": if deny { "Deny" } else { "Pin" }});
        if fallback {
            spec_json["fallbackImage"] = json!("busybox:1");
        }
        let unresolved = policy("p", spec_json);
        let mut resolved = unresolved.clone();
        resolved.status = Some(status_over(&resolved, &nodes, &table));
        let before = index_over(std::slice::from_ref(&unresolved), &nodes);
        let after = index_over(std::slice::from_ref(&resolved), &nodes);
        let metadata = match &noise {
            Some(noise) => json!({"annotations": {"example.com/note": noise},
                                  "labels": {"app": noise}}),
            None => json!({}),
        };
        let mut pod = simple_pod(metadata, spec);
        pod.metadata.resource_version = Some("7".into());
        let admitted = match after.plan_pod(&pod) {
            ImagePlan::Patch { patch, .. } => Some(apply(&pod, &patch)),
            ImagePlan::Skip(_) => Some(pod.clone()),
            ImagePlan::Deny { .. } | ImagePlan::Hold { .. } => None,
        };
        let held = held(&pod, &before);
        let decided = release(Some(&after), &stored(&held), RULES, Duration::ZERO);
        match admitted {
            Some(mut expected) => {
                let released = apply(&held, decided.patch.as_ref().unwrap());
                expected.spec.as_mut().unwrap().scheduling_gates = Some(Vec::new());
                prop_assert_eq!(released, expected);
            }
            // A refusal at admission is the failure rule at release: still held, saying why.
            None => {
                let marked = apply(&held, decided.patch.as_ref().unwrap());
                prop_assert_eq!(gates(&marked), vec![SCHEDULING_GATE.to_owned()]);
                prop_assert!(annotation(&marked, HELD_ANNOTATION).is_some());
            }
        }
    }
}
