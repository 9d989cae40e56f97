use base64::engine::general_purpose::STANDARD as BASE64;
use json_patch::{AddOperation, Patch, PatchOperation};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;

pub(crate) const UID: &str = "0df28fbd-5f5f-11e8-bc74-36e6bb280816";

/// A pod as a ReplicaSet creates it.
pub(crate) fn a_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "web:1"}]}
    }))
    .unwrap()
}

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
    let review: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    review["response"].clone()
}

fn refused(body: &[u8]) -> (Refused, Value) {
    let answer = read_review::<Pod>(body).unwrap_err();
    assert_eq!(answer.outcome, DENIED);
    let why = [
        Refused::MalformedReview,
        Refused::WrongKind,
        Refused::UnreadableObject,
    ]
    .into_iter()
    .find(|r| r.as_str() == answer.reason)
    .unwrap();
    (why, response_of(*answer))
}

#[test]
fn an_apiserver_review_reads_with_its_uid_and_dry_run() {
    let pod = a_pod();
    let request = read_review::<Pod>(&body(&apiserver_review(&pod, true))).unwrap();
    assert_eq!(request.uid, UID);
    assert!(request.dry_run);
    assert_eq!(request.object.unwrap().metadata.name.as_deref(), Some("p"));
}

#[test]
fn what_no_planner_reads_is_skipped_unread_so_a_review_odd_only_there_is_still_planned() {
    let mut review = apiserver_review(&a_pod(), false);
    let request = &mut review["request"];
    // Each of these, decoded, would have been refused as unreadable.
    request["userInfo"] = json!({"username": 7, "groups": "not a list"});
    request["resource"] = json!(["pods"]);
    request["requestKind"] = json!("Pod");
    request["oldObject"] = json!({"spec": {"containers": "not a list"}});
    let request = read_review::<Pod>(&body(&review)).unwrap();
    assert_eq!(request.uid, UID);
    assert_eq!(request.namespace.as_deref(), Some("default"));
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
    let mut review = apiserver_review(&a_pod(), false);
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
    let mut review = apiserver_review(&a_pod(), false);
    review["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let (why, response) = refused(&body(&review));
    assert_eq!(why, Refused::WrongKind);
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
    let mut review = apiserver_review(&a_pod(), false);
    review["request"]["object"]["spec"]["containers"] = json!("not a list");
    let (why, response) = refused(&body(&review));
    assert_eq!(why, Refused::UnreadableObject);
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
fn a_route_for_jobs_reads_a_job_review_and_refuses_a_pod_review() {
    let mut review = apiserver_review(&a_pod(), false);
    review["request"]["kind"] = json!({"group": "batch", "version": "v1", "kind": "Job"});
    review["request"]["object"] = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "step-1", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}],
                                        "restartPolicy": "Never"}}}
    });
    let job = read_review::<Job>(&body(&review)).unwrap();
    assert_eq!(job.object.unwrap().metadata.name.as_deref(), Some("step-1"));
    let pod = read_review::<Job>(&body(&apiserver_review(&a_pod(), false))).unwrap_err();
    assert_eq!(pod.reason, "WrongKind");
    assert!(
        response_of(*pod)["status"]["message"]
            .as_str()
            .unwrap()
            .contains("admits jobs only, got v1 Pod")
    );
}

/// A verdict in a made-up vocabulary, to see how each response is written.
struct Said(Response<'static>);

impl Verdict for Said {
    fn outcome(&self) -> &'static str {
        "said"
    }

    fn reason(&self) -> &'static str {
        "Because"
    }

    fn response(&self) -> Response<'_> {
        match &self.0 {
            Response::Allow { patch, warnings } => Response::Allow {
                patch: *patch,
                warnings: warnings.clone(),
            },
            Response::Deny(message) => Response::Deny(message.clone()),
        }
    }
}

static PATCH: std::sync::LazyLock<Patch> = std::sync::LazyLock::new(|| {
    Patch(vec![PatchOperation::Add(AddOperation {
        path: json_patch::jsonptr::PointerBuf::from_tokens(["metadata", "labels", "a/b"]),
        value: json!("c"),
    })])
});

#[test]
fn a_verdict_becomes_a_base64_patch_a_denial_or_warnings_under_its_own_labels() {
    let patched = Answer::planned(
        UID,
        &Said(Response::Allow {
            patch: Some((&*PATCH).into()),
            warnings: Vec::new(),
        }),
    );
    assert_eq!((patched.outcome, patched.reason), ("said", "Because"));
    let response = response_of(patched);
    assert_eq!(
        (&response["uid"], &response["allowed"]),
        (&json!(UID), &json!(true))
    );
    assert_eq!(response["patchType"], "JSONPatch");
    let patch = base64::Engine::decode(&BASE64, response["patch"].as_str().unwrap()).unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&patch).unwrap(),
        json!([{"op": "add", "path": "/metadata/labels/a~1b", "value": "c"}])
    );
    assert!(response.get("status").is_none() && response.get("warnings").is_none());

    let denied = response_of(Answer::planned(UID, &Said(Response::Deny("no".into()))));
    assert_eq!(denied["allowed"], false);
    assert_eq!(denied["status"], json!({"message": "no"}));
    assert!(denied.get("patch").is_none());

    let warned = response_of(Answer::planned(
        UID,
        &Said(Response::Allow {
            patch: None,
            warnings: vec!["left alone".into()],
        }),
    ));
    assert_eq!(warned["allowed"], true);
    assert_eq!(warned["warnings"], json!(["left alone"]));
    assert!(warned.get("patch").is_none() && warned.get("patchType").is_none());
}

fn with_containers(count: usize) -> Vec<u8> {
    let mut review = apiserver_review(&a_pod(), false);
    review["request"]["object"]["spec"]["containers"] = (0..count)
        .map(|i| json!({"name": format!("c{i}"), "image": "web:1"}))
        .collect();
    body(&review)
}

#[test]
fn an_array_over_the_limit_is_refused_before_anything_is_decoded() {
    let request = read_review::<Pod>(&with_containers(shape::MAX_ARRAY_ELEMENTS)).unwrap();
    assert_eq!(
        request.object.unwrap().spec.unwrap().containers.len(),
        shape::MAX_ARRAY_ELEMENTS
    );
    let answer = read_review::<Pod>(&with_containers(shape::MAX_ARRAY_ELEMENTS + 1)).unwrap_err();
    assert_eq!(answer.reason, "TooLarge");
    let response = response_of(*answer);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("an array of more than 4096 elements, over ocifit's limit"),
        "{response}"
    );
}

/// `review` as kube-apiserver orders it: `request.uid` first (Go writes fields in declaration
/// order; `json!` sorts them, which puts the uid after the object).
pub(crate) fn uid_first(review: &Value) -> Vec<u8> {
    let mut review = review.clone();
    let uid = review["request"]
        .as_object_mut()
        .and_then(|r| r.remove("uid"))
        .unwrap();
    let text = serde_json::to_string(&review).unwrap();
    text.replacen(r#""request":{"#, &format!(r#""request":{{"uid":{uid},"#), 1)
        .into_bytes()
}

#[test]
fn a_refused_array_answers_the_uid_read_before_it() {
    let mut review = apiserver_review(&a_pod(), false);
    review["request"]["object"]["spec"]["containers"] = (0..=shape::MAX_ARRAY_ELEMENTS)
        .map(|i| json!({"name": format!("c{i}"), "image": "web:1"}))
        .collect();
    let answer = read_review::<Pod>(&uid_first(&review)).unwrap_err();
    assert_eq!(answer.reason, "TooLarge");
    assert_eq!(response_of(*answer)["uid"], UID);
    // Written after the array, the uid is never read: the answer cannot name it.
    let answer = read_review::<Pod>(&body(&review)).unwrap_err();
    assert_eq!(answer.reason, "TooLarge");
    assert_eq!(response_of(*answer)["uid"], "");
}

#[test]
fn the_streaming_pass_finds_the_uid_in_a_prefix_and_nowhere_but_the_request() {
    let review = apiserver_review(&a_pod(), false);
    let whole = uid_first(&review);
    assert_eq!(shape::scan(&whole[..150]).uid.as_deref(), Some(UID));
    assert!(
        shape::scan(&whole[..150]).refused.is_some(),
        "a prefix is cut JSON"
    );
    let scanned = shape::scan(&whole);
    assert_eq!((scanned.uid.as_deref(), scanned.refused), (Some(UID), None));
    let mut elsewhere = review.clone();
    elsewhere["request"].as_object_mut().unwrap().remove("uid");
    elsewhere["request"]["object"]["metadata"]["uid"] = json!("not-the-request");
    elsewhere["uid"] = json!("not-the-request-either");
    assert_eq!(shape::scan(&body(&elsewhere)).uid, None);
    let not_a_string = json!({"request": {"uid": {"nested": "x"}}});
    assert_eq!(shape::scan(&body(&not_a_string)).uid, None);
}
