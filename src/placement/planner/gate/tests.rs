use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::PodSchedulingGate;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::placement::fixtures::{gate_names, labelled, map, pod, policy, without_the_gate};
use crate::placement::planner::policy::Policy;
use crate::placement::planner::select::{Exclusion, Selection};

fn patched(pod: &Pod, patch: &Patch) -> Pod {
    let mut value = serde_json::to_value(pod).unwrap();
    json_patch::patch(&mut value, patch).unwrap();
    serde_json::from_value(value).unwrap()
}

fn gate_patch(plan: GatePlan) -> Patch {
    match plan {
        GatePlan::Gate { patch, .. } => patch,
        GatePlan::Leave(why) => panic!("left the pod: {why:?}"),
    }
}

fn web() -> Policy {
    policy("web", json!({}))
}

#[test]
fn a_selected_pod_gets_the_gate_and_the_label_and_nothing_else() {
    let policy = web();
    let original = pod(&[("web", "app:v1")]);
    let GatePlan::Gate {
        policy: name,
        patch,
    } = plan_gate(&original, Selection::Selected(&policy))
    else {
        panic!("not gated")
    };
    assert_eq!(name, "web");
    let gated = patched(&original, &patch);
    assert_eq!(gate_names(&gated), ["placement.ocifit.io/platforms"]);
    assert_eq!(
        gated.metadata.labels,
        Some(map(&[("placement.ocifit.io/policy", "web")]))
    );
    assert_eq!(
        without_the_gate(&gated),
        original,
        "nothing but the gate, the label and the termination message policy changed"
    );
}

#[test]
fn containers_left_at_file_report_their_log_tail_and_a_chosen_policy_is_kept() {
    let policy = web();
    let mut original = pod(&[("unset", "a:1"), ("file", "b:1"), ("chosen", "c:1")]);
    let spec = original.spec.as_mut().unwrap();
    spec.containers[1].termination_message_policy = Some("File".into());
    spec.containers[2].termination_message_policy = Some("FallbackToLogsOnError".into());
    spec.init_containers = Some(vec![k8s_openapi::api::core::v1::Container {
        name: "setup".into(),
        image: Some("d:1".into()),
        ..Default::default()
    }]);
    let patch = gate_patch(plan_gate(&original, Selection::Selected(&policy)));
    let text = serde_json::to_string(&patch).unwrap();
    assert!(
        !text.contains("/spec/containers/2/"),
        "the chosen policy is not written again: {text}"
    );
    let gated = patched(&original, &patch);
    let spec = gated.spec.unwrap();
    let policies: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| (c.name.as_str(), c.termination_message_policy.as_deref()))
        .collect();
    assert_eq!(
        policies,
        [
            ("setup", Some("FallbackToLogsOnError")),
            ("unset", Some("FallbackToLogsOnError")),
            ("file", Some("FallbackToLogsOnError")),
            ("chosen", Some("FallbackToLogsOnError")),
        ]
    );
}

#[test]
fn other_gates_and_labels_are_kept_and_the_label_key_is_escaped() {
    let policy = web();
    let mut original = labelled(pod(&[("web", "app:v1")]), &[("app", "web")]);
    original.spec.as_mut().unwrap().scheduling_gates = Some(vec![PodSchedulingGate {
        name: "example.com/quota".into(),
    }]);
    let patch = gate_patch(plan_gate(&original, Selection::Selected(&policy)));
    let text = serde_json::to_string(&patch).unwrap();
    assert!(
        text.contains("/metadata/labels/placement.ocifit.io~1policy"),
        "{text}"
    );
    let gated = patched(&original, &patch);
    assert_eq!(
        gate_names(&gated),
        ["example.com/quota", "placement.ocifit.io/platforms"]
    );
    assert_eq!(
        gated.metadata.labels,
        Some(map(&[
            ("app", "web"),
            ("placement.ocifit.io/policy", "web")
        ]))
    );
}

#[test]
fn reinvocation_on_its_own_output_plans_nothing() {
    let policy = web();
    let original = pod(&[("web", "app:v1")]);
    let gated = patched(
        &original,
        &gate_patch(plan_gate(&original, Selection::Selected(&policy))),
    );
    assert_eq!(
        plan_gate(&gated, Selection::Selected(&policy)),
        GatePlan::Leave(Leave::AlreadyGated)
    );
}

#[test]
fn a_gate_already_there_keeps_the_policy_that_put_it() {
    let first = web();
    let later = policy("later", json!({}));
    let original = pod(&[("web", "app:v1")]);
    let gated = patched(
        &original,
        &gate_patch(plan_gate(&original, Selection::Selected(&first))),
    );
    assert_eq!(
        plan_gate(&gated, Selection::Selected(&later)),
        GatePlan::Leave(Leave::AlreadyGated)
    );
}

#[test]
fn a_copied_released_pod_is_gated_again_for_the_policy_selecting_it_now() {
    let policy = web();
    let copied = labelled(
        pod(&[("web", "app:v1")]),
        &[("placement.ocifit.io/policy", "old")],
    );
    let gated = patched(
        &copied,
        &gate_patch(plan_gate(&copied, Selection::Selected(&policy))),
    );
    assert_eq!(gate_names(&gated), ["placement.ocifit.io/platforms"]);
    assert_eq!(
        gated.metadata.labels.unwrap()["placement.ocifit.io/policy"],
        "web"
    );
}

#[test]
fn a_copy_of_a_released_pod_loses_the_released_label_so_the_controller_sees_it() {
    let policy = web();
    for existing in [None, Some("placement.ocifit.io/platforms")] {
        let mut copied = labelled(
            pod(&[("web", "app:v1")]),
            &[
                ("placement.ocifit.io/policy", "web"),
                ("placement.ocifit.io/released", "true"),
                ("app", "web"),
            ],
        );
        copied.spec.as_mut().unwrap().scheduling_gates =
            existing.map(|name| vec![PodSchedulingGate { name: name.into() }]);
        let gated = patched(
            &copied,
            &gate_patch(plan_gate(&copied, Selection::Selected(&policy))),
        );
        assert_eq!(gate_names(&gated), ["placement.ocifit.io/platforms"]);
        let labels = gated.metadata.labels.unwrap();
        assert_eq!(
            labels.keys().collect::<Vec<_>>(),
            ["app", "placement.ocifit.io/policy"]
        );
    }
}

#[test]
fn excluded_and_unselected_pods_are_left_untouched() {
    let original = pod(&[("web", "app:v1")]);
    assert_eq!(
        plan_gate(&original, Selection::Excluded(Exclusion::DaemonSet)),
        GatePlan::Leave(Leave::Excluded(Exclusion::DaemonSet))
    );
    assert_eq!(
        plan_gate(&original, Selection::Unselected),
        GatePlan::Leave(Leave::Unselected)
    );
}

fn arb_pod() -> impl Strategy<Value = Pod> {
    (
        proptest::option::of(proptest::collection::btree_map(
            prop_oneof![
                Just("app".to_owned()),
                Just("placement.ocifit.io/policy".to_owned()),
                Just("placement.ocifit.io/released".to_owned()),
                Just("a/b~c".to_owned())
            ],
            prop_oneof![Just("web".to_owned()), Just("other".to_owned())],
            0..3,
        )),
        proptest::option::of(proptest::collection::vec(
            prop_oneof![
                Just("placement.ocifit.io/platforms".to_owned()),
                Just("example.com/quota".to_owned())
            ],
            0..2,
        )),
    )
        .prop_map(|(labels, gates)| {
            let mut pod = pod(&[("web", "app:v1")]);
            pod.metadata.labels = labels;
            pod.spec.as_mut().unwrap().scheduling_gates = gates.map(|gates| {
                let mut gates: Vec<PodSchedulingGate> = gates
                    .into_iter()
                    .map(|name| PodSchedulingGate { name })
                    .collect();
                gates.dedup();
                gates
            });
            pod
        })
}

proptest! {
    #[test]
    fn after_admission_every_selected_pod_is_gated_labelled_and_stable(pod in arb_pod()) {
        let policy = web();
        let after = match plan_gate(&pod, Selection::Selected(&policy)) {
            GatePlan::Gate { patch, .. } => patched(&pod, &patch),
            GatePlan::Leave(Leave::AlreadyGated) => pod.clone(),
            GatePlan::Leave(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
        };
        let ours = gate_names(&after).iter().filter(|g| **g == "placement.ocifit.io/platforms").count();
        prop_assert_eq!(ours, 1);
        prop_assert!(after.metadata.labels.as_ref().unwrap().contains_key("placement.ocifit.io/policy"));
        for gate in gate_names(&pod) {
            prop_assert!(gate_names(&after).contains(&gate), "kept {}", gate);
        }
        prop_assert!(!after.metadata.labels.as_ref().unwrap().contains_key("placement.ocifit.io/released"));
        for (key, value) in pod.metadata.labels.iter().flatten() {
            if key != "placement.ocifit.io/policy" && key != "placement.ocifit.io/released" {
                prop_assert_eq!(&after.metadata.labels.as_ref().unwrap()[key], value);
            }
        }
        prop_assert_eq!(plan_gate(&after, Selection::Selected(&policy)), GatePlan::Leave(Leave::AlreadyGated));
        let mut containers = after.spec.as_ref().unwrap().containers.clone();
        for container in &mut containers {
            let policy = container.termination_message_policy.take();
            prop_assert_eq!(policy.as_deref(), Some("FallbackToLogsOnError"));
        }
        prop_assert_eq!(&containers, &pod.spec.as_ref().unwrap().containers);
    }
}
