//! The node inventory the status is computed from: every node's labels (from metadata-only
//! watches) with its NFD features (merged NodeFeature objects, when NFD publishes them). Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::nodes::ClusterNode;
use crate::engine::{NodeFeature, NodeInputs, features_by_node};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::NODE_NAME_LABEL;

    fn node(name: &str, labels: &[(&str, &str)]) -> Arc<ClusterNode> {
        let mut strings = crate::cluster::nodes::Strings::default();
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
}
