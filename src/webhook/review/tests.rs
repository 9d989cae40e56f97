use serde_json::{Value, json};

use super::*;
use crate::webhook::planner::tests::fixtures::{index, policy, resolved, simple_pod};

pub(crate) const UID: &str = "0df28fbd-5f5f-11e8-bc74-36e6bb280816";

/// A review exactly as kube-apiserver sends it for a pod CREATE (fields and nulls included).
pub(crate) fn apiserver_review(pod: &Pod, dry_run: bool) -> Value {
    let mut object = serde_json::to_value(pod).unwrap();
    object["metadata"]["creationTimestamp"] = Value::Null;
    json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod.metadata.name.clone().unwrap_or_default(),
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "5b3a9c2e-6f0d-4b1e-9d43-0c4f2f7b8a11",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                           "system:authenticated"]
            },
            "object": object,
            "oldObject": null,
            "dryRun": dry_run,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                        "fieldManager": "kube-controller-manager"}
        }
    })
}

fn body(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

/// The response part of an encoded answer.
pub(crate) fn response_of(answer: Answer) -> Value {
    let review: Value = serde_json::from_slice(&answer.encode()).unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    review["response"].clone()
}

fn refused(body: &[u8]) -> (Refused, Value) {
    let answer = read(body).unwrap_err();
    assert_eq!(answer.outcome, AdmissionOutcome::Denied);
    let why = [
        Refused::MalformedReview,
        Refused::NotAPod,
        Refused::UnreadablePod,
    ]
    .into_iter()
    .find(|r| r.as_str() == answer.reason)
    .unwrap();
    (why, response_of(*answer))
}

#[test]
fn an_apiserver_review_reads_with_its_uid_and_dry_run() {
    let pod = simple_pod(json!({}), json!({}));
    let request = read(&body(&apiserver_review(&pod, true))).unwrap();
    assert_eq!(request.uid, UID);
    assert!(request.dry_run);
    assert_eq!(request.object.unwrap().metadata.name.as_deref(), Some("p"));
}

#[test]
fn an_empty_body_is_denied_saying_so_with_an_empty_uid() {
    for body in [&b""[..], b"  \n"] {
        let (why, response) = refused(body);
        assert_eq!(why, Refused::MalformedReview);
        assert_eq!(response["uid"], "");
        assert_eq!(response["allowed"], false);
        assert!(
            response["status"]["message"]
                .as_str()
                .unwrap()
                .contains("empty")
        );
    }
}

#[test]
fn garbage_is_denied_as_not_json() {
    let (why, response) = refused(b"\x00\xffnot json{");
    assert_eq!(why, Refused::MalformedReview);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON"),
        "{response}"
    );
}

#[test]
fn another_kind_of_document_is_denied_naming_what_it_was_and_keeping_the_uid() {
    let mut review = apiserver_review(&simple_pod(json!({}), json!({})), false);
    review["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (why, response) = refused(&body(&review));
    assert_eq!(why, Refused::MalformedReview);
    assert_eq!(response["uid"], UID);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("v1beta1")
    );

    let (_, response) =
        refused(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("no request")
    );
}

#[test]
fn a_review_of_something_other_than_a_pod_is_denied_with_its_kind() {
    let mut review = apiserver_review(&simple_pod(json!({}), json!({})), false);
    review["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let (why, response) = refused(&body(&review));
    assert_eq!(why, Refused::NotAPod);
    assert_eq!(response["uid"], UID);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("apps/v1 Deployment"),
        "{response}"
    );
}

#[test]
fn a_pod_that_does_not_parse_is_denied_with_the_field_at_fault() {
    let mut review = apiserver_review(&simple_pod(json!({}), json!({})), false);
    review["request"]["object"]["spec"]["containers"] = json!("not a list");
    let (why, response) = refused(&body(&review));
    assert_eq!(why, Refused::UnreadablePod);
    assert_eq!(response["uid"], UID);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("containers"),
        "{response}"
    );
}

#[test]
fn a_plan_becomes_a_patch_a_denial_or_a_warning_on_the_response() {
    let index = index(&[resolved(policy("app", json!({"onUnpinned": "Deny"})))]);
    let request = |pod: &Pod| read(&body(&apiserver_review(pod, false))).unwrap();

    let vanilla = simple_pod(json!({}), json!({"nodeSelector": {"flavor": "vanilla"}}));
    let req = request(&vanilla);
    let answer = Answer::planned(&req, &index.plan(&req));
    assert_eq!(
        (answer.outcome, answer.reason),
        (AdmissionOutcome::Patched, "ImageSelected")
    );
    let response = response_of(answer);
    assert_eq!(
        (response["uid"].clone(), response["allowed"].clone()),
        (json!(UID), json!(true))
    );
    assert_eq!(response["patchType"], "JSONPatch");

    let spanning = simple_pod(json!({}), json!({}));
    let req = request(&spanning);
    let answer = Answer::planned(&req, &index.plan(&req));
    assert_eq!(
        (answer.outcome, answer.reason),
        (AdmissionOutcome::Denied, "Unpinned")
    );
    let response = response_of(answer);
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("c-"),
        "{response}"
    );

    let daemon = simple_pod(
        json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d",
                                    "uid": "u", "controller": true}]}),
        json!({}),
    );
    let req = request(&daemon);
    let answer = Answer::planned(&req, &index.plan(&req));
    assert_eq!(answer.outcome, AdmissionOutcome::Skipped);
    let response = response_of(answer);
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none());
    assert_eq!(response["warnings"].as_array().unwrap().len(), 1);
}
