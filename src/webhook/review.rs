//! AdmissionReviews in and out: reads a request body into an admission request for a pod, or
//! says exactly what is wrong with it; turns the planner's [`Plan`] into the response; encodes
//! the review the apiserver gets back. Pure: no I/O, no clock. It must not decide anything about
//! the pod (the planner does) and never fails: every input yields a review to send.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::Pod;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::Value;

use super::planner::{Decision, Plan};
use crate::telemetry::AdmissionOutcome;

/// The largest request body read. The apiserver refuses requests over 3 MiB and etcd objects
/// over 1.5 MiB, and a pod CREATE review carries one object: no real review comes near it.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Why a request was refused before the planner saw it (the `reason` metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The body is empty, not JSON, or not an `admission.k8s.io/v1` AdmissionReview with a
    /// request.
    MalformedReview,
    /// The review is about something other than a pod.
    NotAPod,
    /// The pod in the review could not be read.
    UnreadablePod,
    /// The body is larger than [`MAX_BODY_BYTES`].
    BodyTooLarge,
    /// The body could not be read (the connection failed).
    UnreadableBody,
    /// The body did not arrive within the deadline.
    Timeout,
    /// No index has been built yet (stores not synced).
    NotReady,
    /// The planner's patch could not be encoded (a bug if seen).
    Internal,
}

impl Refused {
    /// The name, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::MalformedReview => "MalformedReview",
            Refused::NotAPod => "NotAPod",
            Refused::UnreadablePod => "UnreadablePod",
            Refused::BodyTooLarge => "BodyTooLarge",
            Refused::UnreadableBody => "UnreadableBody",
            Refused::Timeout => "Timeout",
            Refused::NotReady => "NotReady",
            Refused::Internal => "Internal",
        }
    }
}

/// A response and how to count it.
#[derive(Debug)]
pub struct Answer {
    /// The response to send, wrapped in a review by [`Answer::encode`].
    pub response: AdmissionResponse,
    /// The outcome label.
    pub outcome: AdmissionOutcome,
    /// The reason label.
    pub reason: &'static str,
}

impl Answer {
    /// A denial of the request with `uid` (empty when it could not be read: the apiserver
    /// then rejects the answer, which denies the pod all the same).
    pub fn refuse(uid: &str, why: Refused, message: impl Into<String>) -> Answer {
        let mut response = AdmissionResponse::invalid(message.into());
        uid.clone_into(&mut response.uid);
        Answer {
            response,
            outcome: AdmissionOutcome::Denied,
            reason: why.as_str(),
        }
    }

    /// The answer carrying out `plan` for `request`.
    pub fn planned(request: &AdmissionRequest<Pod>, plan: &Plan) -> Answer {
        let response = AdmissionResponse::from(request);
        let (mut response, outcome) = match plan {
            Plan::Patch {
                patch, decision, ..
            } => match response.with_patch(patch.clone()) {
                Ok(patched) if *decision == Decision::Pinned => (patched, AdmissionOutcome::Pinned),
                Ok(patched) => (patched, AdmissionOutcome::Patched),
                Err(err) => {
                    return Answer::refuse(
                        &request.uid,
                        Refused::Internal,
                        format!("ocifit failed to encode its patch: {err}"),
                    );
                }
            },
            Plan::Deny { message, .. } => (response.deny(message), AdmissionOutcome::Denied),
            Plan::Skip { .. } => (response, AdmissionOutcome::Skipped),
        };
        let warnings = plan.warnings();
        if !warnings.is_empty() {
            response.warnings = Some(warnings);
        }
        Answer {
            response,
            outcome,
            reason: plan.reason(),
        }
    }

    /// The AdmissionReview to send, as JSON. The patch goes out base64-encoded, as the
    /// apiserver documents it (kube serialises it as an array of numbers, which Go accepts but
    /// which is four times larger).
    pub fn encode(mut self) -> Vec<u8> {
        let uid = self.response.uid.clone();
        let patch = self.response.patch.take();
        let encoded = serde_json::to_value(self.response.into_review()).and_then(|mut review| {
            if let (Some(patch), Some(response)) = (patch, review.get_mut("response")) {
                response["patch"] = Value::String(BASE64.encode(patch));
            }
            serde_json::to_vec(&review)
        });
        encoded.unwrap_or_else(|err| {
            // Not reachable (the response is plain data); still an answer, never a 500.
            serde_json::json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": false, "status": {
                    "status": "Failure", "code": 500,
                    "message": format!("ocifit failed to encode its answer: {err}")}},
            })
            .to_string()
            .into_bytes()
        })
    }
}

/// Reads a request body as the apiserver sends it. On error, the denial to send.
pub fn read(body: &[u8]) -> Result<AdmissionRequest<Pod>, Box<Answer>> {
    let malformed = |uid: &str, message: String| {
        Box::new(Answer::refuse(uid, Refused::MalformedReview, message))
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(malformed(
            "",
            "the request body is empty: expected an admission.k8s.io/v1 AdmissionReview".into(),
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|err| {
        malformed(
            "",
            format!("the request body is not JSON ({err}): expected an admission.k8s.io/v1 AdmissionReview"),
        )
    })?;
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    let uid = text("/request/uid").unwrap_or_default();
    let (api_version, kind) = (text("/apiVersion"), text("/kind"));
    if (api_version, kind) != (Some("admission.k8s.io/v1"), Some("AdmissionReview")) {
        return Err(malformed(
            uid,
            format!(
                "expected an admission.k8s.io/v1 AdmissionReview, got apiVersion {} kind {}",
                api_version.unwrap_or("(none)"),
                kind.unwrap_or("(none)")
            ),
        ));
    }
    if !value.get("request").is_some_and(Value::is_object) {
        return Err(malformed(uid, "the AdmissionReview has no request".into()));
    }
    let (group, version, resource_kind) = (
        text("/request/kind/group").unwrap_or_default(),
        text("/request/kind/version").unwrap_or_default(),
        text("/request/kind/kind").unwrap_or_default(),
    );
    if (group, resource_kind) != ("", "Pod") {
        let gv = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        return Err(Box::new(Answer::refuse(
            uid,
            Refused::NotAPod,
            format!("ocifit admits pods only, got {gv} {resource_kind}: check the webhook's rules"),
        )));
    }
    let uid = uid.to_owned();
    let review: AdmissionReview<Pod> = serde_path_to_error::deserialize(value).map_err(|err| {
        Box::new(Answer::refuse(
            &uid,
            Refused::UnreadablePod,
            format!(
                "the pod in the AdmissionReview could not be read at {}: {}",
                err.path(),
                err.inner()
            ),
        ))
    })?;
    review.try_into().map_err(|err| {
        malformed(
            &uid,
            format!("the AdmissionReview could not be read: {err}"),
        )
    })
}

#[cfg(test)]
pub(crate) mod tests;
