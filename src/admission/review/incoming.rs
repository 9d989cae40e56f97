//! The review as it is read: the fields a planner reads, straight into typed values in one
//! streaming pass. Not kube's `AdmissionReview`, whose flattened `TypeMeta` makes serde buffer
//! the whole body as a generic tree first. What no planner reads is skipped unread, not
//! decoded: `request.options` and `response` (generic trees of whatever a client sends),
//! `userInfo` (a dozen strings, a map), the resource and the requested kind and resource, and
//! `oldObject` (a whole second object on an update).

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::Resource;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::{GroupVersionKind, GroupVersionResource, TypeMeta};
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// An AdmissionReview with its request.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "K: DeserializeOwned"))]
pub(super) struct Review<K> {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) request: Option<Request<K>>,
}

/// The request of a review: what planners read of it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "K: DeserializeOwned"))]
pub(super) struct Request<K> {
    uid: String,
    pub(super) kind: GroupVersionKind,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    object: Option<K>,
    #[serde(default)]
    dry_run: bool,
}

impl<K: Resource> Review<K> {
    /// The admission request, as kube types it, with what was skipped left empty: no user, no
    /// resource, no old object, no options (see [`Planner::plan`](crate::admission::route::Planner::plan)).
    pub(super) fn into_request(self) -> Option<AdmissionRequest<K>> {
        let types = TypeMeta {
            api_version: self.api_version,
            kind: self.kind,
        };
        self.request.map(|r| AdmissionRequest {
            types,
            uid: r.uid,
            kind: r.kind,
            resource: GroupVersionResource::gvr("", "", ""),
            sub_resource: None,
            request_kind: None,
            request_resource: None,
            request_sub_resource: None,
            name: r.name,
            namespace: r.namespace,
            operation: r.operation,
            user_info: UserInfo::default(),
            object: r.object,
            old_object: None,
            dry_run: r.dry_run,
            options: None,
        })
    }
}
