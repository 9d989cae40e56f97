//! What node selection reads of a node, for every shape a node comes in.

use k8s_openapi::api::core::v1::Node;
use kube_core::{ObjectMeta, PartialObjectMeta};

/// What node selection reads of a node: its name and labels; for `ObjectMeta`, `Node` and
/// `PartialObjectMeta<Node>`, so the controller (node metadata) and the CLI (whole nodes) share it.
pub trait NodeView {
    /// The node's name (`metadata.name`), the only field matchFields can read.
    fn name(&self) -> &str;
    /// The value of the node's label `key`, if it carries that label.
    fn label(&self, key: &str) -> Option<&str>;
}

impl NodeView for ObjectMeta {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }
}

impl NodeView for Node {
    fn name(&self) -> &str {
        self.metadata.name()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.label(key)
    }
}

impl NodeView for PartialObjectMeta<Node> {
    fn name(&self) -> &str {
        self.metadata.name()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.label(key)
    }
}
