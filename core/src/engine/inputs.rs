//! What a node offers the engine: its labels (ocifit rules read them) and its NFD features (NFD
//! rules read them), from NFD's `NodeFeature` objects merged per node, or projected from its
//! `feature.node.kubernetes.io/*` labels as docs/controller.md's "Node features without
//! NodeFeature objects" lists; and what an artifact's rules read of it ([`Reads`]: for grouping
//! nodes into classes and the policy status's `classKeys`). Plain data: no client, no watch.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// The label NFD puts on every NodeFeature object to name its node.
pub const NODE_NAME_LABEL: &str = "nfd.node.kubernetes.io/node-name";

/// The prefix of the node labels NFD publishes features as (read back by the label projection).
pub const FEATURE_LABEL_PREFIX: &str = "feature.node.kubernetes.io/";

/// Label name (after the prefix, before the first `.`) → the attribute feature it projects to.
const PROJECTED: &[(&str, &str)] = &[
    ("cpu-model", "cpu.model"),
    ("cpu-cstate", "cpu.cstate"),
    ("cpu-pstate", "cpu.pstate"),
    ("cpu-security", "cpu.security"),
    ("cpu-coprocessor", "cpu.coprocessor"),
    ("kernel-version", "kernel.version"),
    ("kernel-selinux", "kernel.selinux"),
    ("system-os_release", "system.osrelease"),
];

/// A node's NFD features, keyed by feature name (`cpu.cpuid`), as NFD's rules see them;
/// serialized in NFD's own shape (`{flags: {F: {elements: {E: {}}}}, attributes: …, instances: …}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "RawFeatures", into = "RawFeatures")]
pub struct Features {
    /// Flag features: element names only.
    pub flags: BTreeMap<String, BTreeSet<String>>,
    /// Attribute features: element name → value.
    pub attributes: BTreeMap<String, BTreeMap<String, String>>,
    /// Instance features: each instance's attributes.
    pub instances: BTreeMap<String, Vec<BTreeMap<String, String>>>,
}

impl Features {
    /// Merges `other` into `self` as NFD does: flags are united, attribute values from `other`
    /// win, instances are appended.
    pub fn merge(&mut self, other: Features) {
        for (feature, elements) in other.flags {
            self.flags.entry(feature).or_default().extend(elements);
        }
        for (feature, elements) in other.attributes {
            self.attributes.entry(feature).or_default().extend(elements);
        }
        for (feature, elements) in other.instances {
            self.instances.entry(feature).or_default().extend(elements);
        }
    }

    /// The features NFD rules would see for a node that has only its labels (see the module
    /// documentation for the exact projection).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Features {
        let mut out = Features::default();
        for (key, value) in labels {
            let Some(name) = key.strip_prefix(FEATURE_LABEL_PREFIX) else {
                continue;
            };
            if name == "cpu-hardware_multithreading" {
                out.attributes
                    .entry("cpu.topology".to_owned())
                    .or_default()
                    .insert("hardware_multithreading".to_owned(), value.clone());
                continue;
            }
            let Some((source, element)) = name.split_once('.') else {
                continue;
            };
            if element.is_empty() {
                continue;
            }
            if source == "cpu-cpuid" {
                if value == "true" {
                    out.flags
                        .entry("cpu.cpuid".to_owned())
                        .or_default()
                        .insert(element.to_owned());
                } else {
                    out.attributes
                        .entry("cpu.cpuid".to_owned())
                        .or_default()
                        .insert(element.to_owned(), value.clone());
                }
                continue;
            }
            if let Some((_, feature)) = PROJECTED.iter().find(|(s, _)| *s == source) {
                out.attributes
                    .entry((*feature).to_owned())
                    .or_default()
                    .insert(element.to_owned(), value.clone());
            }
        }
        out
    }
}

/// Where a node's NFD features came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FeatureSource {
    /// NFD NodeFeature objects for the node.
    NodeFeature,
    /// Projected from the node's `feature.node.kubernetes.io/*` labels (no NodeFeature object).
    Labels,
}

/// Everything the engine reads about one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeInputs {
    /// The node's labels.
    pub labels: BTreeMap<String, String>,
    /// Its merged NodeFeature features, or `None` when it has no NodeFeature object.
    pub features: Option<Features>,
}

impl NodeInputs {
    /// A node known by its labels only.
    pub fn new(labels: BTreeMap<String, String>) -> NodeInputs {
        NodeInputs {
            labels,
            features: None,
        }
    }

    /// Adds the node's merged NodeFeature features (from [`features_by_node`]).
    pub fn with_features(mut self, features: Option<Features>) -> NodeInputs {
        self.features = features;
        self
    }

    /// The features NFD rules see: the NodeFeature features, else the label projection.
    pub fn nfd_features(&self) -> (Cow<'_, Features>, FeatureSource) {
        match &self.features {
            Some(features) => (Cow::Borrowed(features), FeatureSource::NodeFeature),
            None => (
                Cow::Owned(Features::from_labels(&self.labels)),
                FeatureSource::Labels,
            ),
        }
    }
}

/// An NFD `NodeFeature` (`nfd.k8s-sigs.io/v1alpha1`): only the fields the engine reads; every
/// other field is tolerated and dropped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFeature {
    /// Name, namespace and labels (the node is named by [`NODE_NAME_LABEL`]).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The discovered features.
    #[serde(default)]
    pub spec: NodeFeatureSpec,
}

/// The part of a NodeFeature's spec the engine reads (its `labels` request is ignored).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFeatureSpec {
    /// The raw features (nodes of one kind have equal features: a reader may share one copy
    /// between objects).
    #[serde(default, deserialize_with = "null_default")]
    pub features: Arc<Features>,
}

/// A list of NodeFeature objects, as `kubectl get nodefeatures -A -o json` prints it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFeatureList {
    #[serde(default, deserialize_with = "null_default")]
    pub items: Vec<NodeFeature>,
}

impl k8s_openapi::Resource for NodeFeature {
    const API_VERSION: &'static str = "nfd.k8s-sigs.io/v1alpha1";
    const GROUP: &'static str = "nfd.k8s-sigs.io";
    const KIND: &'static str = "NodeFeature";
    const VERSION: &'static str = "v1alpha1";
    const URL_PATH_SEGMENT: &'static str = "nodefeatures";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for NodeFeature {
    const LIST_KIND: &'static str = "NodeFeatureList";
}

impl k8s_openapi::Metadata for NodeFeature {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Merges NodeFeature objects into features per node name (from [`NODE_NAME_LABEL`]; objects
/// without it are ignored, as NFD ignores them). The order is nfd-master's: objects in
/// `nfd_namespace` first, then by name, then by namespace; later objects' attribute values win.
pub fn features_by_node<'a>(
    items: impl IntoIterator<Item = &'a NodeFeature>,
    nfd_namespace: &str,
) -> BTreeMap<String, Features> {
    let mut by_node: BTreeMap<&str, Vec<&NodeFeature>> = BTreeMap::new();
    for item in items {
        let node = item
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(NODE_NAME_LABEL));
        if let Some(node) = node {
            by_node.entry(node).or_default().push(item);
        }
    }
    by_node
        .into_iter()
        .map(|(node, mut objects)| {
            objects.sort_by_key(|o| {
                let ns = o.metadata.namespace.as_deref().unwrap_or("");
                (
                    ns != nfd_namespace,
                    o.metadata.name.as_deref().unwrap_or(""),
                    ns,
                )
            });
            let mut merged = Features::default();
            for object in objects {
                merged.merge(Features::clone(&object.spec.features));
            }
            (node.to_owned(), merged)
        })
        .collect()
}

/// NFD's wire shape of `spec.features`.
#[derive(Default, Serialize, Deserialize)]
struct RawFeatures {
    #[serde(default, deserialize_with = "null_default")]
    flags: BTreeMap<String, Elements<BTreeMap<String, Nil>>>,
    #[serde(default, deserialize_with = "null_default")]
    attributes: BTreeMap<String, Elements<BTreeMap<String, String>>>,
    #[serde(default, deserialize_with = "null_default")]
    instances: BTreeMap<String, Elements<Vec<Instance>>>,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(bound(deserialize = "T: Default + Deserialize<'de>"))]
struct Elements<T: Default> {
    #[serde(default, deserialize_with = "null_default")]
    elements: T,
}

#[derive(Default, Serialize, Deserialize)]
struct Instance {
    #[serde(default, deserialize_with = "null_default")]
    attributes: BTreeMap<String, String>,
}

/// NFD's empty struct for flag elements (`{}`).
#[derive(Default, Serialize, Deserialize)]
struct Nil {}

impl From<RawFeatures> for Features {
    fn from(raw: RawFeatures) -> Features {
        Features {
            flags: raw
                .flags
                .into_iter()
                .map(|(f, e)| (f, e.elements.into_keys().collect()))
                .collect(),
            attributes: raw
                .attributes
                .into_iter()
                .map(|(f, e)| (f, e.elements))
                .collect(),
            instances: raw
                .instances
                .into_iter()
                .map(|(f, e)| (f, e.elements.into_iter().map(|i| i.attributes).collect()))
                .collect(),
        }
    }
}

impl From<Features> for RawFeatures {
    fn from(features: Features) -> RawFeatures {
        RawFeatures {
            flags: features
                .flags
                .into_iter()
                .map(|(f, e)| {
                    let elements = e.into_iter().map(|n| (n, Nil {})).collect();
                    (f, Elements { elements })
                })
                .collect(),
            attributes: features
                .attributes
                .into_iter()
                .map(|(f, elements)| (f, Elements { elements }))
                .collect(),
            instances: features
                .instances
                .into_iter()
                .map(|(f, e)| {
                    let elements = e
                        .into_iter()
                        .map(|attributes| Instance { attributes })
                        .collect();
                    (f, Elements { elements })
                })
                .collect(),
        }
    }
}

/// Go marshals empty maps and slices as `null`; read `null` as empty.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// What an artifact's rules read from a node: the values that distinguish node classes. Part of
/// the policy status (`classKeys`), so the webhook groups nodes exactly as the controller did
/// without the artifact at hand.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reads {
    /// Node label keys (ocifit rules).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub labels: BTreeSet<String>,
    /// NFD features by name (NFD rules).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub features: BTreeMap<String, FeatureReads>,
}

/// What NFD rules read of one feature. Whether the feature exists (and as flags, attributes or
/// instances) is always read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureReads {
    /// Element names read by `matchExpressions` (their presence and value, in every instance).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub elements: BTreeSet<String>,
    /// A `matchName` reads the whole set of element names of the feature.
    #[serde(default)]
    pub names: bool,
}

impl Reads {
    /// Adds what `other` reads (candidates mode: the union over every candidate's artifact).
    pub fn extend(&mut self, other: &Reads) {
        self.labels.extend(other.labels.iter().cloned());
        for (feature, reads) in &other.features {
            let mine = self.features.entry(feature.clone()).or_default();
            mine.elements.extend(reads.elements.iter().cloned());
            mine.names |= reads.names;
        }
    }
}
