//! Pods left alone: not a creation, mirror pods, DaemonSet pods, bound pods, and the webhook's
//! own output on reinvocation.

use serde_json::json;

use super::fixtures::*;
use crate::image_selection::planner::ImagePlan;

fn flavors_index() -> crate::image_selection::planner::Index {
    index(&[resolved(policy("flavors", json!({})))])
}

#[test]
fn pods_the_planner_must_not_touch_are_skipped_with_the_reason() {
    let index = flavors_index();
    let cases = [
        (
            simple_pod(
                json!({"annotations": {"kubernetes.io/config.mirror": "abc"}}),
                json!({}),
            ),
            "MirrorPod",
            "mirror pod",
        ),
        (
            simple_pod(
                json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                "name": "agent", "uid": "u1", "controller": true}]}),
                json!({}),
            ),
            "DaemonSetPod",
            "DaemonSet agent",
        ),
        (
            simple_pod(
                json!({"labels": {"oci.image.compatibilities.selection/enabled": "false"}}),
                json!({}),
            ),
            "NotOptedIn",
            "lacks label oci.image.compatibilities.selection/enabled",
        ),
        (
            simple_pod(json!({}), json!({"nodeName": "n3"})),
            "NodeNameSet",
            "bound to node n3",
        ),
    ];
    for (pod, expected, text) in cases {
        let plan = plan(&index, &pod);
        let (reason, message) = skipped(&plan);
        assert_eq!(reason, expected);
        assert!(message.contains(text), "{message}");
        assert_eq!(plan.warnings(), [message.to_owned()]);
    }
}

#[test]
fn a_pod_owned_by_a_replica_set_is_planned() {
    let index = flavors_index();
    let pod = simple_pod(
        json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": "web-1", "uid": "u1", "controller": true}]}),
        json!({"nodeSelector": {"zone": "a"}}),
    );
    assert!(matches!(plan(&index, &pod), ImagePlan::Patch { .. }));
}

#[test]
fn requests_other_than_pod_creation_are_skipped() {
    let index = flavors_index();
    let pod = simple_pod(json!({}), json!({}));
    for (operation, object) in [("UPDATE", Some(&pod)), ("DELETE", None), ("CREATE", None)] {
        let plan = index.plan(&request_for(operation, object, false));
        assert_eq!(skipped(&plan).0, "NotPodCreation", "{operation}");
    }
}

#[test]
fn reinvocation_over_its_own_output_changes_nothing() {
    let index = flavors_index();
    for spec in [json!({"nodeSelector": {"zone": "a"}}), json!({})] {
        let pod = simple_pod(json!({}), spec);
        let once = patched(&pod, &plan(&index, &pod));
        let again = plan(&index, &once);
        assert_eq!(skipped(&again).0, "AlreadyPlanned");
        assert!(skipped(&again).1.contains("ImageSelectionPolicy flavors"));
    }
}

#[test]
fn a_copied_decision_with_the_placeholder_back_is_planned_again() {
    let index = flavors_index();
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "a"}}));
    let mut copy = patched(&pod, &plan(&index, &pod));
    copy.spec.as_mut().unwrap().containers[0].image = Some(PLACEHOLDER.into());
    let after = patched(&copy, &plan(&index, &copy));
    assert_eq!(image_of(&after, "app"), "debian:11");
}

#[test]
fn a_dry_run_plans_exactly_as_a_real_request() {
    let index = flavors_index();
    for spec in [
        json!({"nodeSelector": {"zone": "a"}}),
        json!({}),
        json!({"nodeName": "n1"}),
        json!({"nodeSelector": {"zone": "z"}}),
    ] {
        let pod = simple_pod(json!({}), spec);
        assert_eq!(
            index.plan(&request(&pod, true)),
            index.plan(&request(&pod, false))
        );
    }
}
