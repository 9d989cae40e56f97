//! Node classes: nodes grouped by the values of exactly the inputs an artifact reads
//! ([`Reads`]) plus `kubernetes.io/arch` and `kubernetes.io/os`, so each kind of node is
//! evaluated once. Also which nodes count for a policy (its plain nodeSelector; control-plane
//! nodes left out by default). Pure; must not evaluate artifacts (the engine does) nor read
//! pods (`selection` does). A class's name hashes a length-prefixed encoding of its values; its
//! name and `labels` are docs/status.md's "Class labels".

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::engine::{FEATURE_LABEL_PREFIX, FeatureReads, Features, NodeInputs, Reads};
/// The node labels of os and architecture, which every class is drawn on.
pub use crate::platform::{ARCH_LABEL, OS_LABEL};

/// Labels that mark a control-plane node.
pub const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

const NAME_HEX_DIGITS: [usize; 3] = [10, 16, 64];
const ENCODING_VERSION: &[u8] = b"ocifit node class v1\n";

/// Nodes that share every value the artifact reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeClass {
    /// Stable name, `c-` and hex digits of a hash of the distinguishing values.
    pub name: String,
    /// The distinguishing values, readable (see the module documentation for the keys).
    pub labels: BTreeMap<String, String>,
    /// The names of its nodes, sorted.
    pub nodes: Vec<String>,
    /// The label values that pick exactly the nodes with this class's values (`None` where the
    /// nodes lack the label: `DoesNotExist`), for pinning a pod with node affinity; `None` when
    /// the class also depends on NFD features, which labels cannot express (pin by node name).
    pub selector: Option<BTreeMap<String, Option<String>>>,
    /// The inputs of its first node by name: evaluating them answers for every node.
    pub inputs: NodeInputs,
}

/// A class's nodes, by name.
type Members<'a> = Vec<(&'a str, &'a NodeInputs)>;

/// Groups nodes (name, inputs) into classes by the values `reads` names, plus arch and os.
/// Classes are sorted by name.
pub fn group<'a, I>(reads: &Reads, nodes: I) -> Vec<NodeClass>
where
    I: IntoIterator<Item = (&'a str, &'a NodeInputs)>,
{
    let mut by_key: BTreeMap<ClassKey, Members<'a>> = BTreeMap::new();
    for (name, inputs) in nodes {
        by_key
            .entry(ClassKey::of(reads, inputs))
            .or_default()
            .push((name, inputs));
    }
    let keyed: Vec<(Vec<u8>, ClassKey, Members<'a>)> = by_key
        .into_iter()
        .map(|(key, mut members)| {
            members.sort_by_key(|(name, _)| *name);
            (hash(&key.encode()), key, members)
        })
        .collect();
    let digits = name_length(keyed.iter().map(|(digest, _, _)| digest.as_slice()));
    let mut classes: Vec<NodeClass> = keyed
        .into_iter()
        .filter_map(|(digest, key, members)| {
            let (_, first) = members.first()?;
            Some(NodeClass {
                name: format!("c-{}", &hex(&digest)[..digits]),
                labels: key.labels(),
                selector: key.features.is_empty().then(|| key.labels.clone()),
                inputs: (*first).clone(),
                nodes: members.iter().map(|(name, _)| (*name).to_owned()).collect(),
            })
        })
        .collect();
    classes.sort_by(|a, b| a.name.cmp(&b.name));
    classes
}

/// Whether classes drawn with `reads` depend on a node's label `key`: arch, os, a label the
/// rules read, or, when they read NFD features, a feature label the label projection may read.
/// A node's other labels can be left out of its inputs without changing its class.
pub fn distinguishes(reads: &Reads, key: &str) -> bool {
    key == ARCH_LABEL
        || key == OS_LABEL
        || reads.labels.contains(key)
        || (!reads.features.is_empty() && key.starts_with(FEATURE_LABEL_PREFIX))
}

/// True for a control-plane node (`node-role.kubernetes.io/control-plane` or `…/master`).
pub(super) fn is_control_plane(labels: &BTreeMap<String, String>) -> bool {
    CONTROL_PLANE_LABELS.iter().any(|l| labels.contains_key(*l))
}

/// True when the node has every label of a plain nodeSelector, with the same value.
pub(super) fn node_selector_matches(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Whether a node counts for a policy: with an empty nodeSelector, every node but control-plane
/// nodes; otherwise exactly the nodes the selector matches.
pub fn node_counts(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    if selector.is_empty() {
        !is_control_plane(labels)
    } else {
        node_selector_matches(selector, labels)
    }
}

/// The values that distinguish a class: those the rules read, and nothing else.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ClassKey {
    labels: BTreeMap<String, Option<String>>,
    features: BTreeMap<String, FeatureKey>,
}

/// What is read of one NFD feature.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct FeatureKey {
    kinds: [bool; 3],
    flags: BTreeSet<String>,
    attributes: BTreeMap<String, String>,
    instances: BTreeSet<BTreeMap<String, String>>,
    names: Option<BTreeSet<String>>,
}

impl ClassKey {
    fn of(reads: &Reads, inputs: &NodeInputs) -> ClassKey {
        let labels = reads
            .labels
            .iter()
            .map(String::as_str)
            .chain([ARCH_LABEL, OS_LABEL])
            .map(|k| (k.to_owned(), inputs.labels.get(k).cloned()))
            .collect();
        let features = if reads.features.is_empty() {
            BTreeMap::new()
        } else {
            let (features, _) = inputs.nfd_features();
            reads
                .features
                .iter()
                .map(|(name, read)| (name.clone(), FeatureKey::of(name, read, &features)))
                .collect()
        };
        ClassKey { labels, features }
    }

    /// A canonical byte encoding: tagged, length-prefixed, in key order.
    fn encode(&self) -> Vec<u8> {
        let mut out = Encoder(ENCODING_VERSION.to_vec());
        out.count(self.labels.len());
        for (key, value) in &self.labels {
            out.str(key);
            out.opt(value.as_deref());
        }
        out.count(self.features.len());
        for (name, f) in &self.features {
            out.str(name);
            for kind in f.kinds {
                out.0.push(u8::from(kind));
            }
            out.strs(f.flags.iter().map(String::as_str), f.flags.len());
            out.count(f.attributes.len());
            for (k, v) in &f.attributes {
                out.str(k);
                out.str(v);
            }
            out.count(f.instances.len());
            for instance in &f.instances {
                out.count(instance.len());
                for (k, v) in instance {
                    out.str(k);
                    out.str(v);
                }
            }
            match &f.names {
                None => out.0.push(0),
                Some(names) => {
                    out.0.push(1);
                    out.strs(names.iter().map(String::as_str), names.len());
                }
            }
        }
        out.0
    }

    fn labels(&self) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = self
            .labels
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect();
        for (name, f) in &self.features {
            let kinds: Vec<&str> = ["flags", "attributes", "instances"]
                .into_iter()
                .zip(f.kinds)
                .filter_map(|(kind, present)| present.then_some(kind))
                .collect();
            if kinds.is_empty() {
                continue;
            }
            out.insert(name.clone(), kinds.join("+"));
            for flag in &f.flags {
                out.insert(format!("{name}.flags/{flag}"), "true".to_owned());
            }
            for (k, v) in &f.attributes {
                out.insert(format!("{name}.attributes/{k}"), v.clone());
            }
            if f.kinds[2] {
                let instances: Vec<String> = f
                    .instances
                    .iter()
                    .map(|i| {
                        let pairs: Vec<String> =
                            i.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        pairs.join(",")
                    })
                    .collect();
                out.insert(format!("{name}.instances"), instances.join("; "));
            }
            if let Some(names) = &f.names {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                out.insert(format!("{name}.names"), names.join(","));
            }
        }
        out
    }
}

impl FeatureKey {
    fn of(name: &str, read: &FeatureReads, features: &Features) -> FeatureKey {
        let flags = features.flags.get(name);
        let attributes = features.attributes.get(name);
        let instances = features.instances.get(name);
        let names = read.names.then(|| {
            let mut names: BTreeSet<String> = BTreeSet::new();
            names.extend(flags.into_iter().flatten().cloned());
            names.extend(attributes.into_iter().flat_map(|a| a.keys().cloned()));
            names.extend(
                instances
                    .into_iter()
                    .flatten()
                    .flat_map(|i| i.keys().cloned()),
            );
            names
        });
        FeatureKey {
            kinds: [flags.is_some(), attributes.is_some(), instances.is_some()],
            flags: read
                .elements
                .iter()
                .filter(|e| flags.is_some_and(|f| f.contains(*e)))
                .cloned()
                .collect(),
            attributes: read
                .elements
                .iter()
                .filter_map(|e| Some((e.clone(), attributes?.get(e)?.clone())))
                .collect(),
            instances: instances
                .into_iter()
                .flatten()
                .map(|i| {
                    read.elements
                        .iter()
                        .filter_map(|e| Some((e.clone(), i.get(e)?.clone())))
                        .collect()
                })
                .collect(),
            names,
        }
    }
}

struct Encoder(Vec<u8>);

impl Encoder {
    fn count(&mut self, n: usize) {
        self.0.extend((n as u64).to_be_bytes());
    }

    fn str(&mut self, s: &str) {
        self.count(s.len());
        self.0.extend(s.as_bytes());
    }

    fn opt(&mut self, s: Option<&str>) {
        match s {
            None => self.0.push(0),
            Some(s) => {
                self.0.push(1);
                self.str(s);
            }
        }
    }

    fn strs<'a>(&mut self, items: impl Iterator<Item = &'a str>, len: usize) {
        self.count(len);
        items.for_each(|s| self.str(s));
    }
}

fn hash(bytes: &[u8]) -> Vec<u8> {
    Sha256::digest(bytes).to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The shortest name length (in hex digits) that keeps every class's name unique.
fn name_length<'a>(digests: impl Iterator<Item = &'a [u8]> + Clone) -> usize {
    for digits in NAME_HEX_DIGITS {
        let names: BTreeSet<String> = digests
            .clone()
            .map(|d| hex(d)[..digits].to_owned())
            .collect();
        if names.len() == digests.clone().count() {
            return digits;
        }
    }
    64
}

#[cfg(test)]
mod tests;
