//! The node inventory as the planner walks it for every new placement: names and labels only,
//! with label keys and values stored once for the whole inventory and each node's labels a
//! short sorted list of ids. A lookup is one hash of the key and a binary search in a few cache
//! lines, where a map per node would chase a pointer per key compared. Knows nothing of policies.

use std::collections::{BTreeMap, HashMap};

use foldhash::fast::RandomState;

use crate::classes::selection::NodeView;

/// Every node's name and labels, interned.
#[derive(Debug, Default)]
pub(super) struct Nodes {
    keys: HashMap<Box<str>, usize, RandomState>,
    values: Vec<Box<str>>,
    nodes: Vec<Node>,
}

#[derive(Debug)]
struct Node {
    name: Box<str>,
    /// (key id, value id), sorted by key id.
    labels: Box<[(usize, usize)]>,
}

/// One node, as node selection reads it.
#[derive(Debug, Clone, Copy)]
pub(super) struct NodeRef<'a> {
    nodes: &'a Nodes,
    node: &'a Node,
}

impl Nodes {
    /// The nodes (name, labels), in order: the `n`th is [`Nodes::get`]`(n)`.
    pub(super) fn new<'n>(
        nodes: impl IntoIterator<Item = (&'n str, &'n BTreeMap<String, String>)>,
    ) -> Nodes {
        let mut out = Nodes::default();
        let mut value_ids: HashMap<&str, usize, RandomState> = HashMap::default();
        for (name, labels) in nodes {
            let mut pairs: Vec<(usize, usize)> = labels
                .iter()
                .map(|(key, value)| {
                    let key = match out.keys.get(key.as_str()) {
                        Some(id) => *id,
                        None => {
                            let id = out.keys.len();
                            out.keys.insert(key.as_str().into(), id);
                            id
                        }
                    };
                    let value = *value_ids.entry(value).or_insert_with(|| {
                        out.values.push(value.as_str().into());
                        out.values.len() - 1
                    });
                    (key, value)
                })
                .collect();
            pairs.sort_unstable();
            out.nodes.push(Node {
                name: name.into(),
                labels: pairs.into(),
            });
        }
        out
    }

    /// The `at`th node.
    pub(super) fn get(&self, at: usize) -> Option<NodeRef<'_>> {
        Some(NodeRef {
            nodes: self,
            node: self.nodes.get(at)?,
        })
    }
}

impl NodeView for NodeRef<'_> {
    fn name(&self) -> &str {
        &self.node.name
    }

    fn label(&self, key: &str) -> Option<&str> {
        let key = *self.nodes.keys.get(key)?;
        let at = self
            .node
            .labels
            .binary_search_by_key(&key, |(k, _)| *k)
            .ok()?;
        let (_, value) = self.node.labels.get(at)?;
        self.nodes.values.get(*value).map(|value| &**value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_reads_back_its_own_labels_and_no_other() {
        let a = BTreeMap::from([
            ("zone".to_owned(), "a".to_owned()),
            ("gpu".to_owned(), "x".to_owned()),
        ]);
        let b = BTreeMap::from([
            ("zone".to_owned(), "b".to_owned()),
            ("disk".to_owned(), "a".to_owned()),
        ]);
        let nodes = Nodes::new([("n1", &a), ("n2", &b)]);
        let n1 = nodes.get(0).unwrap();
        let n2 = nodes.get(1).unwrap();
        assert_eq!((n1.name(), n2.name()), ("n1", "n2"));
        assert_eq!(
            (n1.label("zone"), n1.label("gpu"), n1.label("disk")),
            (Some("a"), Some("x"), None)
        );
        assert_eq!(
            (n2.label("zone"), n2.label("gpu"), n2.label("disk")),
            (Some("b"), None, Some("a"))
        );
        assert_eq!(n1.label("absent"), None);
        assert!(nodes.get(2).is_none());
    }
}
