//! The admission request as planners read it: the fields of the review's `request` that a
//! planner reads, and nothing else. Not kube's `AdmissionRequest`, which carries what no planner
//! reads and holds the object inline, copied whole at each move; boxed, it is read once into its
//! place (docs/performance.md).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::core::GroupVersionKind;
use kube::core::admission::Operation;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// One admission request for an object of kind `K`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "K: DeserializeOwned"))]
pub struct Request<K> {
    /// The request's uid, which the answer must carry.
    pub uid: String,
    pub kind: GroupVersionKind,
    /// The object's name; empty when the apiserver generates it.
    #[serde(default)]
    pub name: String,
    /// The object's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// What is done to the object.
    pub operation: Operation,
    /// The object as it will be stored (none for a delete).
    #[serde(default)]
    pub object: Option<Box<K>>,
    /// Whether nothing is stored (`kubectl --dry-run=server`): no Event then.
    #[serde(default)]
    pub dry_run: bool,
}

/// The members of an object's metadata the planners read — identity, labels, annotations and
/// owners — read from a review into k8s-openapi's `ObjectMeta`; the rest (`managedFields`, …) is
/// skipped unread. Every feature's read of its kind (`read_as!`) takes its metadata through it.
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReadMetadata {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

impl From<ReadMetadata> for ObjectMeta {
    fn from(read: ReadMetadata) -> Self {
        ObjectMeta {
            name: read.name,
            generate_name: read.generate_name,
            namespace: read.namespace,
            uid: read.uid,
            resource_version: read.resource_version,
            creation_timestamp: read.creation_timestamp,
            deletion_timestamp: read.deletion_timestamp,
            labels: read.labels,
            annotations: read.annotations,
            owner_references: read.owner_references,
            ..ObjectMeta::default()
        }
    }
}

/// Makes `$read`, a type holding the part of a `$whole` a planner reads (its metadata at
/// `$field`), a Kubernetes resource of the same kind (k8s-openapi's `Resource` and
/// `Metadata`), so a route may admit it: the host checks a review's kind by it.
macro_rules! read_as {
    ($read:ty, $whole:ty, $($field:tt).+) => {
        impl k8s_openapi::Resource for $read {
            const API_VERSION: &'static str = <$whole as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$whole as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$whole as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$whole as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str =
                <$whole as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <$whole as k8s_openapi::Resource>::Scope;
        }

        impl k8s_openapi::Metadata for $read {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.$($field).+
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.$($field).+
            }
        }
    };
}
pub(crate) use read_as;
