//! The review as it is read: the fields an admission request has, straight into typed values in
//! one streaming pass. Not kube's `AdmissionReview`, whose flattened `TypeMeta` makes serde buffer
//! the whole body as a generic tree first, and whose `request.options` (and `response`) are
//! generic trees of whatever a client sends: neither is read here (the apiserver's options say
//! nothing a planner needs).

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

/// The request of a review.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "K: DeserializeOwned"))]
pub(super) struct Request<K> {
    uid: String,
    pub(super) kind: GroupVersionKind,
    resource: GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    request_sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    user_info: UserInfo,
    object: Option<K>,
    old_object: Option<K>,
    #[serde(default)]
    dry_run: bool,
}

impl<K: Resource> Review<K> {
    /// The admission request, as kube types it (without `options`).
    pub(super) fn into_request(self) -> Option<AdmissionRequest<K>> {
        let types = TypeMeta {
            api_version: self.api_version,
            kind: self.kind,
        };
        self.request.map(|r| AdmissionRequest {
            types,
            uid: r.uid,
            kind: r.kind,
            resource: r.resource,
            sub_resource: r.sub_resource,
            request_kind: r.request_kind,
            request_resource: r.request_resource,
            request_sub_resource: r.request_sub_resource,
            name: r.name,
            namespace: r.namespace,
            operation: r.operation,
            user_info: r.user_info,
            object: r.object,
            old_object: r.old_object,
            dry_run: r.dry_run,
            options: None,
        })
    }
}
