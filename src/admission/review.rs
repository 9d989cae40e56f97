//! AdmissionReviews in and out: reads a request body into an admission request for the route's
//! kind, or says exactly what is wrong with it; encodes a planner's verdict (or the host's own
//! refusal) as the review the apiserver gets back, in one pass. Pure: no I/O, no clock. It must
//! not decide anything about the object (the planners do) and never fails: every input yields a
//! review to send.

use base64::engine::general_purpose::STANDARD as BASE64;
use json_patch::Patch;
use kube::Resource;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::verdict::{Response, Verdict};

/// The largest request body read. The apiserver refuses requests over 3 MiB and etcd objects
/// over 1.5 MiB, and a CREATE review carries one object: no real review comes near it.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Why a request was refused before the planner saw it (the `reason` metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The body is empty, not JSON, or not an `admission.k8s.io/v1` AdmissionReview with a
    /// request.
    MalformedReview,
    /// The review is about another kind than the route admits.
    WrongKind,
    /// The object in the review could not be read.
    UnreadableObject,
    /// The body is larger than [`MAX_BODY_BYTES`].
    BodyTooLarge,
    /// The body could not be read (the connection failed).
    UnreadableBody,
    /// The body did not arrive within the deadline.
    Timeout,
}

impl Refused {
    /// The name, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::MalformedReview => "MalformedReview",
            Refused::WrongKind => "WrongKind",
            Refused::UnreadableObject => "UnreadableObject",
            Refused::BodyTooLarge => "BodyTooLarge",
            Refused::UnreadableBody => "UnreadableBody",
            Refused::Timeout => "Timeout",
        }
    }
}

/// An encoded answer and how to count it.
#[derive(Debug)]
pub struct Answer {
    /// The AdmissionReview to send, as JSON.
    pub body: Vec<u8>,
    /// The `outcome` label.
    pub outcome: &'static str,
    /// The `reason` label.
    pub reason: &'static str,
}

/// The outcome label of a request refused before any planner saw it.
pub const DENIED: &str = "denied";

impl Answer {
    /// A denial of the request with `uid` (empty when it could not be read: the apiserver
    /// then rejects the answer, which denies the object all the same).
    pub fn refuse(uid: &str, why: Refused, message: impl Into<String>) -> Answer {
        let message = message.into();
        let status = Status {
            status: Some("Failure"),
            message: &message,
            reason: Some("InvalidRequest"),
        };
        Answer {
            body: encode(uid, false, Some(status), None, &[]),
            outcome: DENIED,
            reason: why.as_str(),
        }
    }

    /// The answer carrying out `verdict` for the request with `uid`.
    pub fn planned(uid: &str, verdict: &impl Verdict) -> Answer {
        let body = match verdict.response() {
            Response::Allow { patch, warnings } => encode(uid, true, None, patch, &warnings),
            Response::Deny(message) => {
                let status = Status {
                    status: None,
                    message: &message,
                    reason: None,
                };
                encode(uid, false, Some(status), None, &[])
            }
        };
        Answer {
            body,
            outcome: verdict.outcome(),
            reason: verdict.reason(),
        }
    }
}

/// The review as the apiserver reads it, written in one pass. The patch goes out
/// base64-encoded, as the apiserver documents it (kube would write an array of numbers, which
/// Go accepts but which is four times larger).
#[derive(Serialize)]
struct Review<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    response: ReviewResponse<'a>,
}

#[derive(Serialize)]
struct ReviewResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<Base64Patch<'a>>,
    #[serde(rename = "patchType", skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

#[derive(Serialize)]
struct Status<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

/// A JSON patch written as base64 of its JSON, streamed: no intermediate copy of the patch.
struct Base64Patch<'a>(&'a Patch);

impl Serialize for Base64Patch<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut encoder = base64::write::EncoderStringWriter::new(&BASE64);
        serde_json::to_writer(&mut encoder, self.0).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&encoder.into_inner())
    }
}

fn encode(
    uid: &str,
    allowed: bool,
    status: Option<Status<'_>>,
    patch: Option<&Patch>,
    warnings: &[String],
) -> Vec<u8> {
    let review = Review {
        api_version: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        response: ReviewResponse {
            uid,
            allowed,
            status,
            patch: patch.map(Base64Patch),
            patch_type: patch.map(|_| "JSONPatch"),
            warnings,
        },
    };
    serde_json::to_vec(&review).unwrap_or_else(|err| {
        // Not reachable (plain data; a patch is plain JSON); still an answer, never a 500.
        let message = format!("ocifit failed to encode its answer: {err}");
        let status = Some(Status {
            status: Some("Failure"),
            message: &message,
            reason: Some("InternalError"),
        });
        let fallback = Review {
            api_version: "admission.k8s.io/v1",
            kind: "AdmissionReview",
            response: ReviewResponse {
                uid,
                allowed: false,
                status,
                patch: None,
                patch_type: None,
                warnings: &[],
            },
        };
        serde_json::to_vec(&fallback).unwrap_or_default()
    })
}

/// Reads a request body as the apiserver sends it, for an object of kind `K`. On error, the
/// denial to send.
pub fn read<K>(body: &[u8]) -> Result<AdmissionRequest<K>, Box<Answer>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    // Every real request is a well-formed review of the route's kind: one typed pass reads it.
    // Anything that pass does not accept is read again, slowly, by `explain` to say exactly
    // what is wrong (the generic tree plus path tracking costs about three times the typed
    // pass).
    if let Ok(review) = serde_json::from_slice::<AdmissionReview<K>>(body)
        && review.types.api_version == "admission.k8s.io/v1"
        && review.types.kind == "AdmissionReview"
        && review.request.as_ref().is_some_and(|request| {
            request.kind.group == K::group(&()) && request.kind.kind == K::kind(&())
        })
        && let Ok(request) = review.try_into()
    {
        return Ok(request);
    }
    explain(body)
}

/// Reads a body the typed pass refused, naming what is wrong with it.
fn explain<K>(body: &[u8]) -> Result<AdmissionRequest<K>, Box<Answer>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
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
    let (expected_group, expected_kind) = (K::group(&()), K::kind(&()));
    if (group, resource_kind) != (expected_group.as_ref(), expected_kind.as_ref()) {
        let gv = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        return Err(Box::new(Answer::refuse(
            uid,
            Refused::WrongKind,
            format!(
                "this ocifit webhook admits {}s only, got {gv} {resource_kind}: check the \
                 webhook's rules",
                expected_kind.to_lowercase()
            ),
        )));
    }
    let uid = uid.to_owned();
    let review: AdmissionReview<K> = serde_path_to_error::deserialize(value).map_err(|err| {
        Box::new(Answer::refuse(
            &uid,
            Refused::UnreadableObject,
            format!(
                "the {} in the AdmissionReview could not be read at {}: {}",
                expected_kind.to_lowercase(),
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
