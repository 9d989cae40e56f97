//! `/mutate` through the admission host's decoding and encoding: pods as the apiserver sends
//! them, answered with the plan and counted under the planner's labels.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::admission::Route;
use crate::admission::review_fixtures::{UID, apiserver_review};
use crate::image_selection::planner::tests::fixtures::{index, policy, resolved, simple_pod};

mod events;

/// The body kube-apiserver sends for a pod CREATE.
fn review(pod: &Pod) -> Vec<u8> {
    serde_json::to_vec(&apiserver_review(pod, false)).unwrap()
}

fn route(index: Option<crate::image_selection::planner::Index>) -> Route {
    let shared = SharedIndex::default();
    if let Some(index) = index {
        shared.store(index);
    }
    Route::new(
        PATH,
        MutatePods {
            index: shared,
            notices: None,
        },
    )
}

/// (outcome, reason, the response part of the review).
fn answer(route: &Route, pod: &Pod) -> (&'static str, &'static str, Value) {
    let answer = route.answer(&review(pod));
    let review: Value = serde_json::from_slice(&answer.body).unwrap();
    (answer.outcome, answer.reason, review["response"].clone())
}

#[test]
fn a_pod_is_patched_denied_or_skipped_always_with_its_uid() {
    let route = route(Some(index(&[resolved(policy(
        "app",
        json!({"onUnpinned": "Deny"}),
    ))])));
    let vanilla = simple_pod(json!({}), json!({"nodeSelector": {"flavor": "vanilla"}}));
    let (outcome, reason, response) = answer(&route, &vanilla);
    assert_eq!((outcome, reason), ("patched", "ImageSelected"));
    assert_eq!(
        (&response["uid"], &response["allowed"]),
        (&json!(UID), &json!(true))
    );
    let patch: Value =
        serde_json::from_slice(&BASE64.decode(response["patch"].as_str().unwrap()).unwrap())
            .unwrap();
    assert!(
        patch
            .as_array()
            .unwrap()
            .iter()
            .any(|op| op["value"] == "debian:11"),
        "{patch}"
    );

    let (outcome, reason, response) = answer(&route, &simple_pod(json!({}), json!({})));
    assert_eq!((outcome, reason), ("denied", "Unpinned"));
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("c-"),
        "{response}"
    );

    let bound = simple_pod(json!({}), json!({"nodeName": "n1"}));
    let (outcome, reason, response) = answer(&route, &bound);
    assert_eq!((outcome, reason), ("skipped", "NodeNameSet"));
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none());
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("nodeName"), "{response}");
}

#[test]
fn before_the_first_index_a_pod_is_held_as_not_ready_with_its_uid() {
    let (outcome, reason, response) = answer(&route(None), &simple_pod(json!({}), json!({})));
    assert_eq!((outcome, reason), ("held", "NotReady"));
    assert_eq!(
        (&response["uid"], &response["allowed"]),
        (&json!(UID), &json!(true))
    );
    let patch: Value =
        serde_json::from_slice(&BASE64.decode(response["patch"].as_str().unwrap()).unwrap())
            .unwrap();
    assert_eq!(
        patch[0],
        json!({"op": "add", "path": "/spec/schedulingGates",
               "value": [{"name": "selection.ocifit.io/image"}]})
    );
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("has not read the policies"), "{response}");
}

#[test]
fn a_field_the_planner_reads_of_the_wrong_type_is_refused_by_its_path_and_the_rest_left_to_the_apiserver()
 {
    let route = route(Some(index(&[resolved(policy("app", json!({})))])));
    let vanilla = simple_pod(json!({}), json!({"nodeSelector": {"flavor": "vanilla"}}));
    let body = |mutate: &dyn Fn(&mut Value)| {
        let mut review = apiserver_review(&vanilla, false);
        mutate(&mut review["request"]["object"]["spec"]["containers"][0]);
        serde_json::to_vec(&review).unwrap()
    };
    let wrong = route.answer(&body(&|container| container["image"] = json!(5)));
    assert_eq!(
        (wrong.outcome, wrong.reason),
        ("denied", "UnreadableObject")
    );
    let review: Value = serde_json::from_slice(&wrong.body).unwrap();
    let message = review["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("spec.containers[0].image"), "{message}");
    // A container's resources are not the planner's to read: the pod gets its image, and the
    // apiserver's own validation answers for the rest.
    let unread = route.answer(&body(&|container| container["resources"] = json!("lots")));
    assert_eq!(
        (unread.outcome, unread.reason),
        ("patched", "ImageSelected")
    );
}
