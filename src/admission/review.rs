//! AdmissionReviews in and out: reads a request body into an admission request for the route's
//! kind, or says exactly what is wrong with it; encodes a planner's verdict (or the host's own
//! refusal) as the review the apiserver gets back, in one pass. Pure: no I/O, no clock. It must
//! not decide anything about the object (the planners do) and never fails: every input yields a
//! review to send.

use kube::Resource;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::patch::Patched;
use super::request::Request;
use encode::{Status, encode};
use head::Lenient;

mod encode;
mod head;
mod shape;
pub use shape::MAX_ARRAY_ELEMENTS;
pub(crate) use shape::{Scan, check, scan};

/// The largest request body read: the apiserver's own request limit, larger than any object etcd
/// stores, and a CREATE review carries one object, so no real review comes near it.
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
    /// The body did not arrive, or the planner did not decide, within the deadline.
    Timeout,
    /// Every place of the route was taken, or the bodies being read filled the host's share of
    /// memory for them: retry.
    Busy,
    /// The body holds an array longer than [`shape::MAX_ARRAY_ELEMENTS`].
    TooLarge,
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
            Refused::Busy => "Busy",
            Refused::TooLarge => "TooLarge",
        }
    }

    /// The HTTP status the denial carries, where it tells a client more than a plain denial:
    /// 429 for [`Refused::Busy`], which clients (and controllers' queues) retry.
    fn code(self) -> Option<u16> {
        matches!(self, Refused::Busy).then_some(429)
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
pub(super) const DENIED: &str = "denied";

/// The outcome label of a request admitted unchanged because no planner could decide it.
pub(super) const SKIPPED: &str = "skipped";

impl Answer {
    /// A denial of the request with `uid` (empty when it could not be read: the apiserver
    /// then rejects the answer, which denies the object all the same).
    pub fn refuse(uid: &str, why: Refused, message: impl Into<String>) -> Answer {
        let message = message.into();
        let status = Status {
            status: Some("Failure"),
            message: &message,
            reason: Some(if why.code().is_some() {
                "TooManyRequests"
            } else {
                "InvalidRequest"
            }),
            code: why.code(),
        };
        Answer {
            body: encode(uid, false, Some(status), None, &[]),
            outcome: DENIED,
            reason: why.as_str(),
        }
    }

    /// The request with `uid` admitted as it is, with `warning` shown to the user: for a route
    /// whose objects are safe undecided, when the host could not decide (`why`).
    pub fn unchanged(uid: &str, why: Refused, warning: impl Into<String>) -> Answer {
        Answer {
            body: encode(uid, true, None, None, &[warning.into()]),
            outcome: SKIPPED,
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
                    code: None,
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

/// Reads a request body as the apiserver sends it, for an object of kind `K`. On error, the
/// denial to send.
pub fn read_review<K>(body: &[u8]) -> Result<Request<K>, Box<Answer>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    read_scanned(body, shape::check(body))
}

/// As [`read_review`], with the body's shape already checked ([`shape::check`] or [`shape::scan`]).
pub(crate) fn read_scanned<K>(body: &[u8], scan: shape::Scan) -> Result<Request<K>, Box<Answer>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    // Arrays past the limit are refused before anything is decoded, answering the uid if the
    // pass read it before the array (a JSON error is left to the passes below, which say it in
    // their words).
    if let Some(why) = scan
        .refused
        .filter(|why| why.contains("over ocifit's limit"))
    {
        return Err(Box::new(Answer::refuse(
            scan.uid.as_deref().unwrap_or_default(),
            Refused::TooLarge,
            format!("the AdmissionReview is refused unread: {why}"),
        )));
    }
    // Every real request is a well-formed review of the route's kind: one typed pass reads it.
    // Anything else is read again, slowly, by `explain` to say exactly what is wrong.
    if let Ok(review) = serde_json::from_slice::<IncomingReview<K>>(body)
        && review.api_version == "admission.k8s.io/v1"
        && review.kind == "AdmissionReview"
        && review.request.as_ref().is_some_and(|request| {
            request.kind.group == K::group(&()) && request.kind.kind == K::kind(&())
        })
        && let Some(request) = review.request
    {
        return Ok(request);
    }
    explain(body)
}

/// Reads a body the typed pass refused, naming what is wrong with it. It streams over the body
/// twice without building a tree of it: once for the few fields it names (the rest skipped),
/// once typed with the path of the first field that does not read.
fn explain<K>(body: &[u8]) -> Result<Request<K>, Box<Answer>>
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
    let Lenient(head) = serde_json::from_slice::<Lenient<head::Review>>(body).map_err(|err| {
        malformed(
            "",
            format!("the request body is not JSON ({err}): expected an admission.k8s.io/v1 AdmissionReview"),
        )
    })?;
    let head = head.unwrap_or_default();
    let request = head.request.0;
    let uid = request
        .as_ref()
        .and_then(|r| r.uid.0.as_deref())
        .unwrap_or_default();
    let (api_version, kind) = (head.api_version.0.as_deref(), head.kind.0.as_deref());
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
    let Some(request) = &request else {
        return Err(malformed(uid, "the AdmissionReview has no request".into()));
    };
    let of = request.kind.0.as_ref();
    let (group, version, resource_kind) = (
        text(of.map(|k| &k.group)),
        text(of.map(|k| &k.version)),
        text(of.map(|k| &k.kind)),
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
    let mut typed = serde_json::Deserializer::from_slice(body);
    let review: IncomingReview<K> =
        serde_path_to_error::deserialize(&mut typed).map_err(|err| {
            Box::new(Answer::refuse(
                &uid,
                Refused::UnreadableObject,
                format!(
                    "failed to read the {} in the AdmissionReview at {}: {}",
                    expected_kind.to_lowercase(),
                    err.path(),
                    err.inner()
                ),
            ))
        })?;
    review
        .request
        .ok_or_else(|| malformed(&uid, "the AdmissionReview has no request".into()))
}

/// The text of a lenient field, empty when absent or not a string.
fn text(field: Option<&Lenient<String>>) -> &str {
    field.and_then(|f| f.0.as_deref()).unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod tests;

/// An AdmissionReview with its request, as it is read: the fields a planner reads, in one
/// streaming pass (not kube's `AdmissionReview`, whose flattened `TypeMeta` makes serde buffer the
/// whole body first); what no planner reads (`options`, `userInfo`, `oldObject`, ...) is skipped unread.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "K: DeserializeOwned"))]
struct IncomingReview<K> {
    api_version: String,
    kind: String,
    request: Option<Request<K>>,
}

/// What the host sends back for a verdict.
#[derive(Debug)]
pub enum Response<'a> {
    /// Admit, with this patch (if any) and these warnings.
    Allow {
        /// The JSON patch against the object as sent.
        patch: Option<Patched<'a>>,
        /// Warnings shown to the user.
        warnings: Vec<String>,
    },
    /// Refuse, with this message.
    Deny(String),
}

/// A planner's answer to one request, in the planner's own vocabulary.
pub trait Verdict {
    /// The `outcome` label of `ocifit_admissions_total` (e.g. `patched`, `denied`, `skipped`).
    fn outcome(&self) -> &'static str;
    /// The `reason` label: the name of the decision, denial or skip.
    fn reason(&self) -> &'static str;
    fn response(&self) -> Response<'_>;
}
