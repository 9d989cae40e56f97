//! The node inventory as the planner walks it for every new placement: the node store's own
//! objects, shared (`Arc`), so every node's labels are held once in the process however many
//! indexes are built from them. Knows nothing of policies.

use std::sync::Arc;

use crate::cluster::ClusterNode;

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
    use crate::cluster::Strings;

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
