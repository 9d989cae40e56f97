//! The index takes unchanged node groupings over from the one it replaces.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::fixtures::{inventory, policy, resolved};
use crate::cluster::{ClusterNode, Strings};
use crate::image_selection::planner::Index;

fn stored(names: &[&str]) -> Vec<Arc<ClusterNode>> {
    let mut strings = Strings::default();
    inventory()
        .iter()
        .filter(|(name, _)| names.contains(&name.as_str()))
        .map(|(name, inputs)| {
            let labels = inputs.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            Arc::new(ClusterNode::new(name, labels, &mut strings))
        })
        .collect()
}

#[test]
fn a_rebuild_for_policies_only_takes_the_groupings_over_and_a_new_node_redraws_them() {
    let policies = || [Arc::new(resolved(policy("app", serde_json::json!({}))))];
    let none = BTreeMap::new();
    let first = Index::new(policies(), stored(&["n1", "n2", "n3"]), &none, None);
    let again = Index::new(policies(), stored(&["n1", "n2", "n3"]), &none, Some(&first));
    assert!(Arc::ptr_eq(&first.groupings[0], &again.groupings[0]));
    let grown = Index::new(
        policies(),
        stored(&["n1", "n2", "n3", "n4"]),
        &none,
        Some(&first),
    );
    assert!(!Arc::ptr_eq(&first.groupings[0], &grown.groupings[0]));
    assert_eq!(grown.groupings[0].members.len(), 4);
}
