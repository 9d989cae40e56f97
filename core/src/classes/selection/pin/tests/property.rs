//! The pinning property over generated clusters, pods and target classes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use kube_core::ObjectMeta;
use proptest::prelude::*;

use crate::classes::selection::{ClassSelector, NodeView, Placement, SelectionError, pin};
use ocifit_testkit::affinity::{node, req, required, term};

const KEYS: [&str; 3] = ["zone", "gpu", "cores"];
const VALUES: [&[&str]; 3] = [&["a", "b", "c"], &["x", "y"], &["1", "4", "8", "many"]];
const BOUNDS: [&str; 5] = ["0", "3", "4", "5", "10"];
const NODES: usize = 6;

/// A node's value index for each of `KEYS`, absent where `None`.
fn arb_node_labels() -> impl Strategy<Value = [Option<usize>; 3]> {
    [
        proptest::option::of(0..3usize),
        proptest::option::of(0..2usize),
        proptest::option::of(0..4usize),
    ]
}

fn arb_label_requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    (
        0..KEYS.len(),
        0..6usize,
        proptest::collection::vec(0..4usize, 1..3),
        0..BOUNDS.len(),
    )
        .prop_map(|(key, operator, picks, bound)| {
            let pool = VALUES[key];
            let values: Vec<&str> = picks.iter().map(|p| pool[p % pool.len()]).collect();
            match operator {
                0 => req(KEYS[key], "In", &values),
                1 => req(KEYS[key], "NotIn", &values),
                2 => req(KEYS[key], "Exists", &[]),
                3 => req(KEYS[key], "DoesNotExist", &[]),
                4 => req("cores", "Gt", &[BOUNDS[bound]]),
                _ => req("cores", "Lt", &[BOUNDS[bound]]),
            }
        })
}

fn arb_name_requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    (any::<bool>(), 0..NODES).prop_map(|(is_in, index)| {
        let name = format!("n{index}");
        req(
            "metadata.name",
            if is_in { "In" } else { "NotIn" },
            &[&name],
        )
    })
}

fn arb_term() -> impl Strategy<Value = NodeSelectorTerm> {
    (
        proptest::collection::vec(arb_label_requirement(), 0..3),
        proptest::collection::vec(arb_name_requirement(), 0..2),
    )
        .prop_map(|(expressions, fields)| term(expressions, fields))
}

/// The cluster's classes over the distinguishing keys in `key_mask`, each described by labels or,
/// where `by_name` says so, by its nodes' names.
fn classes_of(nodes: &[ObjectMeta], key_mask: u8, by_name: &[bool]) -> Vec<ClassSelector> {
    let mut groups: BTreeMap<BTreeMap<String, Option<String>>, BTreeSet<String>> = BTreeMap::new();
    for node in nodes {
        let projection = KEYS
            .iter()
            .enumerate()
            .filter(|(index, _)| key_mask & (1 << index) != 0)
            .map(|(_, key)| ((*key).to_owned(), node.label(key).map(str::to_owned)))
            .collect();
        groups
            .entry(projection)
            .or_default()
            .insert(node.name().to_owned());
    }
    groups
        .into_iter()
        .enumerate()
        .map(|(index, (labels, names))| {
            if by_name.get(index).copied().unwrap_or_default() {
                ClassSelector::NodeNames(names)
            } else {
                ClassSelector::Labels(labels)
            }
        })
        .collect()
}

fn candidates(spec: &PodSpec, nodes: &[ObjectMeta]) -> BTreeSet<String> {
    Placement::from_pod_spec(spec)
        .expect("generated placements are valid")
        .candidates(nodes)
        .into_iter()
        .map(|node| node.name().to_owned())
        .collect()
}

proptest! {
    #[test]
    fn pinning_keeps_exactly_the_candidates_of_the_target_classes(
        node_labels in proptest::collection::vec(arb_node_labels(), 1..=NODES),
        zone_selector in proptest::option::of(0..3usize),
        terms in proptest::option::of(proptest::collection::vec(arb_term(), 0..4)),
        key_mask in 0..8u8,
        by_name in proptest::collection::vec(any::<bool>(), 8),
        target_mask in any::<u32>(),
    ) {
        let nodes: Vec<ObjectMeta> = node_labels
            .iter()
            .enumerate()
            .map(|(index, values)| {
                let pairs: Vec<(&str, &str)> = KEYS
                    .iter()
                    .zip(values)
                    .zip(VALUES)
                    .filter_map(|((key, value), pool)| value.map(|v| (*key, pool[v])))
                    .collect();
                node(&format!("n{index}"), &pairs)
            })
            .collect();
        let targets: Vec<ClassSelector> = classes_of(&nodes, key_mask, &by_name)
            .into_iter()
            .enumerate()
            .filter(|(index, _)| target_mask & (1 << index) != 0)
            .map(|(_, class)| class)
            .collect();
        let spec = PodSpec {
            node_selector: zone_selector
                .map(|zone| BTreeMap::from([("zone".to_owned(), VALUES[0][zone].to_owned())])),
            affinity: terms.map(required),
            ..PodSpec::default()
        };
        let before = candidates(&spec, &nodes);
        let in_targets: BTreeSet<String> = before
            .iter()
            .filter(|name| {
                nodes.iter().any(|node| {
                    node.name() == name.as_str() && targets.iter().any(|class| class.contains(node))
                })
            })
            .cloned()
            .collect();

        match pin(spec.affinity.as_ref(), &targets) {
            Ok(affinity) => {
                let after = candidates(&PodSpec { affinity: affinity.clone(), ..spec.clone() }, &nodes);
                prop_assert!(after.is_subset(&before), "pinning added candidates: {after:?} ⊄ {before:?}");
                for name in &after {
                    let node = nodes.iter().find(|node| node.name() == name.as_str());
                    prop_assert!(
                        node.is_some_and(|node| targets.iter().any(|class| class.contains(node))),
                        "{name} is outside the target classes"
                    );
                }
                prop_assert_eq!(&after, &in_targets);
                prop_assert_eq!(pin(affinity.as_ref(), &targets), Ok(affinity.clone()));
            }
            Err(SelectionError::NoTargetClass) => prop_assert!(targets.is_empty()),
            Err(SelectionError::PinMatchesNoNode) => prop_assert!(in_targets.is_empty()),
            Err(other) => prop_assert!(false, "unexpected error: {other}"),
        }
    }
}
