//! A node as the node watch decodes it: the metadata-only form the apiserver sends (never the
//! spec or status), read into the four fields the view keeps (name, resourceVersion, deletion
//! time, labels). Every other member, `managedFields` above all (most of a node's metadata, and
//! rewritten by each kubelet heartbeat), is skipped by the decoder without being built: decoding
//! it into `ObjectMeta` and dropping it afterwards costs the decode all the same.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use serde::{Deserialize, Deserializer};

/// A node's name, resourceVersion, deletion time and labels, as the watch sent them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeMeta {
    /// Only `name`, `resource_version`, `deletion_timestamp` and `labels` are ever set.
    pub metadata: ObjectMeta,
}

/// What is decoded of the object: its metadata, nothing else.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: Read,
}

/// What is decoded of the metadata; the members not named here are skipped unbuilt.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Read {
    name: Option<String>,
    resource_version: Option<String>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
}

impl<'de> Deserialize<'de> for NodeMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Wire { metadata } = Wire::deserialize(deserializer)?;
        Ok(NodeMeta {
            metadata: ObjectMeta {
                name: metadata.name,
                resource_version: metadata.resource_version,
                deletion_timestamp: metadata.deletion_timestamp,
                labels: metadata.labels,
                ..ObjectMeta::default()
            },
        })
    }
}

impl Resource for NodeMeta {
    type DynamicType = ();
    type Scope = <Node as Resource>::Scope;

    /// Asks for the metadata-only form, as for `PartialObjectMeta<Node>`.
    fn metadata_api() -> bool {
        true
    }

    fn kind(dt: &()) -> Cow<'_, str> {
        Node::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Node::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Node::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Node::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use kube::core::PartialObjectMeta;
    use kube::core::watch::WatchEvent;

    use super::*;

    /// A heartbeat's watch event as the apiserver sends it to a metadata-only watch.
    fn heartbeat() -> String {
        serde_json::json!({
            "type": "MODIFIED",
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {
                    "name": "kwok-node-7",
                    "uid": "5c1d",
                    "resourceVersion": "81234",
                    "creationTimestamp": "2026-11-25T19:00:00Z",
                    "labels": {"kubernetes.io/arch": "arm64", "type": "kwok"},
                    "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
                    "managedFields": [{
                        "manager": "kwok", "operation": "Update", "apiVersion": "v1",
                        "time": "2026-11-25T19:00:01Z", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {
                            "f:lastHeartbeatTime": {}, "f:status": {}}}}},
                        "subresource": "status"
                    }]
                }
            }
        })
        .to_string()
    }

    #[test]
    fn a_heartbeat_is_read_into_the_fields_the_view_keeps_and_nothing_else() {
        let WatchEvent::Modified(node) =
            serde_json::from_str::<WatchEvent<NodeMeta>>(&heartbeat()).unwrap()
        else {
            panic!("not a modification");
        };
        let full = match serde_json::from_str::<WatchEvent<PartialObjectMeta<Node>>>(&heartbeat())
            .unwrap()
        {
            WatchEvent::Modified(full) => full.metadata,
            other => panic!("{other:?}"),
        };
        assert!(full.managed_fields.is_some(), "the event carries them");
        assert_eq!(
            node.metadata,
            ObjectMeta {
                name: full.name,
                resource_version: full.resource_version,
                labels: full.labels,
                ..ObjectMeta::default()
            }
        );
    }

    #[test]
    fn the_watch_asks_for_the_metadata_only_form_of_nodes() {
        assert!(NodeMeta::metadata_api());
        assert_eq!(NodeMeta::url_path(&(), None), "/api/v1/nodes");
    }
}
