//! The planner's index: what does not depend on the pod, computed once per change of the policy
//! or node stores. Policies by name and by artifact reference; for each policy the nodes that
//! count for it and the class of each, drawn with its `status.classKeys` as the controller draws
//! them. Policies that read the same keys under the same nodeSelector share one grouping.
//! A pod's candidate nodes take one node per class when its placement reads only class keys, else
//! a walk of its policy's nodes ([`Nodes`]: the node store's own objects, shared, so each node's
//! labels are held once however many indexes are built). Answers are remembered per placement and
//! grouping in a bounded memo that lives and dies with the index, so none goes stale.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::api::ImageSelectionPolicy;
use crate::classes::{
    ARCH_LABEL, CONTROL_PLANE_LABELS, NodeClass, OS_LABEL, distinguishes, group, node_counts,
};
use crate::cluster::{ClusterNode, Strings};
use crate::engine::{Features, NodeInputs, Reads};

/// Placements remembered per index before the memo starts over.
const MEMO_CAPACITY: usize = 4096;

/// Everything the planner needs of the policies and nodes, ready for [`Index::plan`]. Shared
/// between request handlers (it is `Sync`); rebuilt, not updated, when the stores change.
#[derive(Debug, Default)]
pub struct Index {
    pub(super) nodes: Nodes,
    pub(super) policies: BTreeMap<String, Entry>,
    pub(super) by_artifact: BTreeMap<String, Vec<String>>,
    pub(super) groupings: Vec<Arc<Grouping>>,
    pub(super) memo: Memo,
}

/// A candidate class of a pod: its index in the grouping and how many candidate nodes it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Candidate {
    pub(super) class: usize,
    pub(super) nodes: usize,
}

/// Candidate classes already found, by grouping and placement (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Memo(Mutex<HashMap<MemoKey, Arc<[Candidate]>>>);

/// A grouping (index in `Index::groupings`) and the digest of a placement written canonically:
/// a fixed 32 bytes per entry whatever the pod's selector and affinity weigh (SHA-256, so two
/// placements never share an entry).
pub(super) type MemoKey = (usize, PlacementDigest);

/// The SHA-256 of a placement's canonical JSON.
pub(super) type PlacementDigest = [u8; 32];

impl Memo {
    /// The remembered answer for `key`, else `find()`'s, remembered. A poisoned lock only
    /// costs the memo, never the answer.
    pub(super) fn get_or_find(
        &self,
        key: MemoKey,
        find: impl FnOnce() -> Vec<Candidate>,
    ) -> Arc<[Candidate]> {
        if let Some(hit) = self.0.lock().ok().and_then(|memo| memo.get(&key).cloned()) {
            return hit;
        }
        let found: Arc<[Candidate]> = find().into();
        if let Ok(mut memo) = self.0.lock() {
            if memo.len() >= MEMO_CAPACITY {
                memo.clear();
            }
            memo.insert(key, Arc::clone(&found));
        }
        found
    }
}

/// One policy and where its classes are.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) policy: Arc<ImageSelectionPolicy>,
    /// The index of its grouping; `None` while it has no `status.classKeys` (not resolved).
    pub(super) grouping: Option<usize>,
    /// For each class of the grouping, its row in `status.classes` (`None`: not reconciled yet).
    pub(super) rows: Vec<Option<usize>>,
}

impl Entry {
    pub(super) fn name(&self) -> &str {
        self.policy.metadata.name.as_deref().unwrap_or_default()
    }
}

/// The nodes that count under one nodeSelector, grouped by one set of class keys.
#[derive(Debug, Clone)]
pub(super) struct Grouping {
    reads: Reads,
    selector: BTreeMap<String, String>,
    /// The classes, sorted by name.
    pub(super) classes: Vec<NodeClass>,
    /// Each counted node (index into `Index::nodes`) with its class (index into `classes`).
    pub(super) members: Vec<(usize, usize)>,
    /// For each class, one of its nodes (index into `Index::nodes`).
    pub(super) representatives: Vec<Option<usize>>,
}

impl Grouping {
    /// Whether every node of a class has the same value (or absence) of label `key`: the keys
    /// classes are drawn on, arch and os.
    pub(super) fn is_class_key(&self, key: &str) -> bool {
        key == ARCH_LABEL || key == OS_LABEL || self.reads.labels.contains(key)
    }
}

impl Index {
    /// Indexes `policies` and `nodes` as their stores hold them (nodes borrowed), with `features`,
    /// the merged NodeFeature features by node name. `earlier`: an index over the same node labels
    /// and features, whose groupings are taken over (when only policies changed).
    pub fn new(
        policies: impl IntoIterator<Item = Arc<ImageSelectionPolicy>>,
        nodes: Vec<Arc<ClusterNode>>,
        features: &BTreeMap<String, Features>,
        earlier: Option<&Index>,
    ) -> Index {
        let mut index = Index {
            nodes: Nodes::new(nodes),
            ..Index::default()
        };
        // Positions in the groupings are positions in the node list: the same list, or none.
        let reusable: Vec<Arc<Grouping>> = earlier
            .filter(|earlier| earlier.nodes.names().eq(index.nodes.names()))
            .map(|earlier| earlier.groupings.clone())
            .unwrap_or_default();
        for policy in policies {
            let Some(name) = policy.metadata.name.clone() else {
                continue;
            };
            if let Some(reference) = &policy.spec.artifact.reference {
                index
                    .by_artifact
                    .entry(reference.clone())
                    .or_default()
                    .push(name.clone());
            }
            // A status resolved from another artifact source than the spec names now (the spec
            // changed, the controller has not caught up) serves nothing. A status that does not
            // say (written before sources were recorded) is taken as it is.
            let source = policy.spec.artifact.source_digest();
            let status = policy.status.as_ref().filter(|s| {
                s.artifact
                    .as_ref()
                    .and_then(|a| a.source.as_deref())
                    .is_none_or(|recorded| recorded == source)
            });
            let (grouping, rows) = match status.and_then(|s| s.class_keys.as_ref()) {
                None => (None, Vec::new()),
                Some(reads) => {
                    let at = index.grouping(reads, &policy.spec.node_selector, features, &reusable);
                    let rows = index.groupings[at]
                        .classes
                        .iter()
                        .map(|class| {
                            status?
                                .classes
                                .iter()
                                .position(|row| row.name == class.name)
                        })
                        .collect();
                    (Some(at), rows)
                }
            };
            index.policies.insert(
                name,
                Entry {
                    policy,
                    grouping,
                    rows,
                },
            );
        }
        index
    }

    /// Indexes `policies` over nodes given as engine inputs (name, labels and features), as a
    /// file or a benchmark holds them rather than a store.
    pub fn over_inputs(policies: &[ImageSelectionPolicy], nodes: &[(String, NodeInputs)]) -> Index {
        let mut strings = Strings::default();
        let stored = nodes
            .iter()
            .map(|(name, inputs)| {
                let labels = inputs.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                Arc::new(ClusterNode::new(name, labels, &mut strings))
            })
            .collect();
        let features = nodes
            .iter()
            .filter_map(|(name, inputs)| Some((name.clone(), inputs.features.clone()?)))
            .collect();
        Index::new(
            policies.iter().cloned().map(Arc::new),
            stored,
            &features,
            None,
        )
    }

    /// The grouping for `reads` under `selector`: one a policy already needed, one of
    /// `reusable`, or drawn now. Each counted node's inputs are built for the drawing only, with
    /// just the labels (and features) the classes are drawn on.
    fn grouping(
        &mut self,
        reads: &Reads,
        selector: &BTreeMap<String, String>,
        features: &BTreeMap<String, Features>,
        reusable: &[Arc<Grouping>],
    ) -> usize {
        let same = |g: &&Arc<Grouping>| &g.reads == reads && &g.selector == selector;
        if let Some(at) = self.groupings.iter().position(|g| same(&g)) {
            return at;
        }
        if let Some(grouping) = reusable.iter().find(same) {
            self.groupings.push(Arc::clone(grouping));
            return self.groupings.len() - 1;
        }
        // Each node's labels that decide whether it counts and which class it is in: copied for
        // the drawing only.
        let read = |key: &str| {
            distinguishes(reads, key)
                || selector.contains_key(key)
                || CONTROL_PLANE_LABELS.contains(&key)
        };
        let counted: Vec<(usize, &str, NodeInputs)> = self
            .nodes
            .iter()
            .map(|(at, node)| (at, node.name(), node.labels_where(read)))
            .filter(|(_, _, labels)| node_counts(selector, labels))
            .map(|(at, name, labels)| {
                let features = (!reads.features.is_empty())
                    .then(|| features.get(name).cloned())
                    .flatten();
                (at, name, NodeInputs::new(labels).with_features(features))
            })
            .collect();
        let classes = group(reads, counted.iter().map(|(_, name, i)| (*name, i)));
        let class_of: HashMap<&str, usize> = classes
            .iter()
            .enumerate()
            .flat_map(|(at, class)| class.nodes.iter().map(move |n| (n.as_str(), at)))
            .collect();
        let members: Vec<(usize, usize)> = counted
            .iter()
            .filter_map(|(at, name, _)| Some((*at, *class_of.get(name)?)))
            .collect();
        let mut representatives = vec![None; classes.len()];
        for (node, class) in &members {
            representatives[*class].get_or_insert(*node);
        }
        self.groupings.push(Arc::new(Grouping {
            reads: reads.clone(),
            selector: selector.clone(),
            classes,
            members,
            representatives,
        }));
        self.groupings.len() - 1
    }
}

/// Every named node, as the store holds it.
#[derive(Debug, Default)]
pub(super) struct Nodes(Vec<Arc<ClusterNode>>);

impl Nodes {
    /// The named nodes, in the order given: the `n`th is [`Nodes::get`]`(n)`.
    pub(super) fn new(nodes: Vec<Arc<ClusterNode>>) -> Nodes {
        Nodes(
            nodes
                .into_iter()
                .filter(|node| !node.name().is_empty())
                .collect(),
        )
    }

    /// The `at`th node.
    pub(super) fn get(&self, at: usize) -> Option<&ClusterNode> {
        self.0.get(at).map(|node| &**node)
    }

    /// Every node's name, in order.
    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|node| node.name())
    }

    /// Every node, with its position.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &ClusterNode)> {
        self.0.iter().map(|node| &**node).enumerate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::NodeView;

    #[test]
    fn unnamed_nodes_are_left_out_and_the_stores_objects_are_shared_not_copied() {
        let mut strings = Strings::default();
        let stored = Arc::new(ClusterNode::new("n1", [("zone", "a")], &mut strings));
        let nodes = Nodes::new(vec![
            Arc::clone(&stored),
            Arc::new(ClusterNode::new("", [("zone", "c")], &mut strings)),
            Arc::new(ClusterNode::new("n2", [("zone", "b")], &mut strings)),
        ]);
        let (n1, n2) = (nodes.get(0).unwrap(), nodes.get(1).unwrap());
        assert_eq!((NodeView::name(n1), NodeView::name(n2)), ("n1", "n2"));
        assert_eq!(NodeView::label(n2, "zone"), Some("b"));
        assert!(nodes.get(2).is_none());
        assert_eq!(
            Arc::strong_count(&stored),
            2,
            "the store's object, not a copy"
        );
    }
}
