//! Nodes as the node watch decodes them ([`NodeMeta`]: the metadata-only form, read into name,
//! resourceVersion, deletion time and labels; every other member, `managedFields` above all, is
//! skipped by the decoder without being built) and as the cluster view holds them: a name and
//! the labels, every label key and value an interned string shared by all the nodes that carry
//! it, in a sorted slice. Pods may select on any label, so every label is kept; this is the one
//! copy of them in the process. [`node_inputs`] is the node inventory a status is computed from:
//! every node's labels with its NFD features (merged NodeFeature objects, when NFD publishes
//! them). Pure.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use serde::{Deserialize, Deserializer};

use crate::classes::NodeView;
use crate::engine::{NodeFeature, NodeInputs, features_by_node};

/// A node: its name (and resource version) in `metadata`, its labels interned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterNode {
    /// Name and resource version only (labels are in [`ClusterNode::labels`]).
    pub metadata: ObjectMeta,
    labels: Box<[(Arc<str>, Arc<str>)]>,
}

impl k8s_openapi::Resource for ClusterNode {
    const API_VERSION: &'static str = <Node as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Node as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Node as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Node as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Node as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for ClusterNode {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl ClusterNode {
    /// The node named `name` with `labels`, its strings taken from `strings`.
    pub fn new<'a>(
        name: &str,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        strings: &mut Strings,
    ) -> ClusterNode {
        let mut labels: Vec<(Arc<str>, Arc<str>)> = labels
            .into_iter()
            .map(|(key, value)| (strings.get(key), strings.get(value)))
            .collect();
        labels.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        ClusterNode {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            labels: labels.into(),
        }
    }

    /// The node a metadata watch saw, its labels interned.
    pub fn from_metadata(node: NodeMeta, strings: &mut Strings) -> ClusterNode {
        let NodeMeta { metadata } = node;
        let labels = metadata.labels.unwrap_or_default();
        let mut compact = ClusterNode::new(
            metadata.name.as_deref().unwrap_or_default(),
            labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            strings,
        );
        compact.metadata.resource_version = metadata.resource_version;
        compact.metadata.deletion_timestamp = metadata.deletion_timestamp;
        compact
    }

    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        let at = self.labels.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        self.labels.get(at).map(|(_, v)| &**v)
    }

    /// Every label, sorted by key.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.labels.iter().map(|(k, v)| (&**k, &**v))
    }

    /// The labels for which `keep` holds, as a map of their own.
    pub fn labels_where(&self, keep: impl Fn(&str) -> bool) -> BTreeMap<String, String> {
        self.labels()
            .filter(|(key, _)| keep(key))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

impl NodeView for ClusterNode {
    fn name(&self) -> &str {
        ClusterNode::name(self)
    }

    fn label(&self, key: &str) -> Option<&str> {
        ClusterNode::label(self, key)
    }
}

/// Interned strings: one shared copy of each distinct label key and value. Strings no node
/// holds any longer are dropped now and then, so the set follows the cluster.
#[derive(Debug, Default)]
pub struct Strings {
    set: HashSet<Arc<str>>,
    added_since_sweep: usize,
}

impl Strings {
    /// The shared copy of `text`.
    pub fn get(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.set.get(text) {
            return Arc::clone(shared);
        }
        self.added_since_sweep += 1;
        if self.added_since_sweep > self.set.len().max(1024) {
            // Only the set holds these: no node carries them any more.
            self.set.retain(|s| Arc::strong_count(s) > 1);
            self.added_since_sweep = 0;
        }
        let shared: Arc<str> = text.into();
        self.set.insert(Arc::clone(&shared));
        shared
    }
}

/// Nodes as (name, inputs), with NodeFeature features merged as nfd-master merges them (objects
/// in `nfd_namespace` first). Only labels for which `keep` holds are copied: a reconcile copies
/// what its policy reads, not every label of every node.
pub fn node_inputs(
    nodes: &[Arc<ClusterNode>],
    node_features: &[Arc<NodeFeature>],
    nfd_namespace: &str,
    keep: impl Fn(&str) -> bool,
) -> Vec<(String, NodeInputs)> {
    let mut features = if node_features.is_empty() {
        BTreeMap::new()
    } else {
        features_by_node(node_features.iter().map(|nf| &**nf), nfd_namespace)
    };
    nodes
        .iter()
        .filter_map(|node| {
            let name = node.metadata.name.clone()?;
            let labels = node.labels_where(&keep);
            let inputs = NodeInputs::new(labels).with_features(features.remove(&name));
            Some((name, inputs))
        })
        .collect()
}

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
    use super::*;
    use crate::engine::NODE_NAME_LABEL;
    use kube::core::PartialObjectMeta;
    use kube::core::watch::WatchEvent;

    #[test]
    fn nodes_share_each_key_and_value_and_read_their_own_labels() {
        let mut strings = Strings::default();
        let a = ClusterNode::new("a", [("zone", "x"), ("arch", "amd64")], &mut strings);
        let b = ClusterNode::new("b", [("arch", "amd64"), ("gpu", "y")], &mut strings);
        assert_eq!(
            (a.label("zone"), a.label("arch"), a.label("gpu")),
            (Some("x"), Some("amd64"), None)
        );
        assert_eq!(
            b.labels().collect::<Vec<_>>(),
            [("arch", "amd64"), ("gpu", "y")]
        );
        let arch = |node: &ClusterNode| Arc::clone(&node.labels[0].1);
        assert!(Arc::ptr_eq(&arch(&a), &arch(&b)), "one copy of amd64");
        assert_eq!(
            a.labels_where(|key| key == "zone"),
            BTreeMap::from([("zone".to_owned(), "x".to_owned())])
        );
    }

    #[test]
    fn strings_no_node_holds_are_swept() {
        let mut strings = Strings::default();
        for i in 0..3000 {
            let _ = strings.get(&format!("host-{i}"));
        }
        assert!(strings.set.len() < 3000, "{}", strings.set.len());
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> Arc<ClusterNode> {
        let mut strings = Strings::default();
        Arc::new(ClusterNode::new(name, labels.iter().copied(), &mut strings))
    }

    fn feature(ns: &str, name: &str, node: &str, flag: &str) -> Arc<NodeFeature> {
        let value = serde_json::json!({
            "metadata": {"name": name, "namespace": ns, "labels": {NODE_NAME_LABEL: node}},
            "spec": {"features": {"flags": {"cpu.cpuid": {"elements": {flag: {}}}}}}
        });
        Arc::new(serde_json::from_value(value).unwrap())
    }

    #[test]
    fn nodes_carry_their_labels_and_their_merged_node_features() {
        let nodes = [
            node("a", &[("zone", "x"), ("kubernetes.io/hostname", "a")]),
            node("b", &[]),
        ];
        let features = [
            feature("nfd", "a", "a", "AVX512F"),
            feature("other", "a-extra", "a", "AMX"),
        ];
        let inventory = node_inputs(&nodes, &features, "nfd", |key| key == "zone");
        assert_eq!(inventory.len(), 2);
        let (name, a) = &inventory[0];
        assert_eq!(name, "a");
        assert_eq!(a.labels["zone"], "x");
        assert!(
            !a.labels.contains_key("kubernetes.io/hostname"),
            "labels the policy does not read are not copied"
        );
        let flags = &a.features.as_ref().unwrap().flags["cpu.cpuid"];
        assert!(
            flags.contains("AVX512F") && flags.contains("AMX"),
            "{flags:?}"
        );
        assert_eq!(inventory[1].1.features, None);
    }

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
