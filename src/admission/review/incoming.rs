//! The review as it is read: the fields a planner reads, straight into typed values in one
//! streaming pass. Not kube's `AdmissionReview`, whose flattened `TypeMeta` makes serde buffer
//! the whole body as a generic tree first. What no planner reads is skipped unread, not
//! decoded: `request.options` and `response` (generic trees of whatever a client sends),
//! `userInfo` (a dozen strings, a map), the resource and the requested kind and resource, and
//! `oldObject` (a whole second object on an update).

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::admission::request::Request;

/// An AdmissionReview with its request.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "K: DeserializeOwned"))]
pub(super) struct Review<K> {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) request: Option<Request<K>>,
}
