//! The node inventory as the planner walks it for every new placement: the node store's own
//! objects, shared (`Arc`), so every node's labels are held once in the process however many
//! indexes are built from them. Knows nothing of policies.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;

use crate::classes::selection::NodeView;

/// Every named node, as the store holds it.
#[derive(Debug, Default)]
pub(super) struct Nodes(Vec<Arc<PartialObjectMeta<Node>>>);

/// One node, as node selection reads it.
#[derive(Debug, Clone, Copy)]
pub(super) struct NodeRef<'a>(&'a PartialObjectMeta<Node>);

/// The labels of a node that has none.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

impl Nodes {
    /// The named nodes, in the order given: the `n`th is [`Nodes::get`]`(n)`.
    pub(super) fn new(nodes: Vec<Arc<PartialObjectMeta<Node>>>) -> Nodes {
        Nodes(
            nodes
                .into_iter()
                .filter(|node| node.metadata.name.is_some())
                .collect(),
        )
    }

    /// The `at`th node.
    pub(super) fn get(&self, at: usize) -> Option<NodeRef<'_>> {
        self.0.get(at).map(|node| NodeRef(node))
    }

    /// Every node: (position, name, labels).
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &str, &BTreeMap<String, String>)> {
        self.0.iter().enumerate().map(|(at, node)| {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
            (at, name, labels)
        })
    }
}

impl NodeView for NodeRef<'_> {
    fn name(&self) -> &str {
        self.0.metadata.name.as_deref().unwrap_or_default()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.0
            .metadata
            .labels
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use kube::core::ObjectMeta;

    use super::*;

    fn node(name: Option<&str>, labels: &[(&str, &str)]) -> Arc<PartialObjectMeta<Node>> {
        Arc::new(PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: name.map(str::to_owned),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            _phantom: Default::default(),
        })
    }

    #[test]
    fn a_node_reads_back_its_own_labels_and_unnamed_nodes_are_left_out() {
        let stored = node(Some("n1"), &[("zone", "a"), ("gpu", "x")]);
        let nodes = Nodes::new(vec![
            Arc::clone(&stored),
            node(None, &[("zone", "c")]),
            node(Some("n2"), &[("zone", "b")]),
        ]);
        let n1 = nodes.get(0).unwrap();
        let n2 = nodes.get(1).unwrap();
        assert_eq!((n1.name(), n2.name()), ("n1", "n2"));
        assert_eq!(
            (n1.label("zone"), n1.label("gpu"), n2.label("gpu")),
            (Some("a"), Some("x"), None)
        );
        assert!(nodes.get(2).is_none());
        assert_eq!(
            Arc::strong_count(&stored),
            2,
            "the store's object, not a copy"
        );
    }
}
