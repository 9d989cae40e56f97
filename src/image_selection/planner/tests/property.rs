//! For random inventories and pods: a patched pod's new image is the status image of every class
//! its (possibly pinned) candidate nodes belong to.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::fixtures::*;
use crate::classes::Placement;
use crate::classes::group;
use crate::engine::NodeInputs;
use crate::image_selection::planner::{Decision, ImagePlan};

pub(crate) const FLAVORS: [&str; 4] = ["vanilla", "chocolate", "strawberry", "mint"];
pub(crate) const IMAGES: [Option<&str>; 3] = [Some("debian:11"), Some("ubuntu:24.04"), None];

pub(crate) fn arb_nodes() -> impl Strategy<Value = Vec<(String, NodeInputs)>> {
    prop::collection::vec((0..FLAVORS.len(), 0..3usize, any::<bool>()), 1..12).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(at, (flavor, zone, arm))| {
                let mut node = worker(&format!("n{at}"), FLAVORS[flavor], ["a", "b", "c"][zone]);
                if arm {
                    node.1
                        .labels
                        .insert("kubernetes.io/arch".into(), "arm64".into());
                }
                node
            })
            .collect()
    })
}

pub(crate) fn arb_pod_spec() -> impl Strategy<Value = serde_json::Value> {
    let zone = prop::option::of(0..3usize);
    let terms = prop::collection::vec(
        (
            prop::sample::subsequence(FLAVORS.to_vec(), 1..3),
            any::<bool>(),
            0..12usize,
        ),
        0..3,
    );
    (zone, terms).prop_map(|(zone, terms)| {
        let mut spec = json!({});
        if let Some(zone) = zone {
            let zone = ["a", "b", "c"][zone];
            spec["nodeSelector"] = json!({ "zone": zone });
        }
        if !terms.is_empty() {
            let terms: Vec<serde_json::Value> = terms
                .into_iter()
                .map(|(flavors, by_name, node)| {
                    if by_name {
                        json!({"matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                                "values": [format!("n{node}")]}]})
                    } else {
                        json!({"matchExpressions": [{"key": "flavor", "operator": "In",
                                                     "values": flavors}]})
                    }
                })
                .collect();
            spec["affinity"] = json!({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
        }
        spec
    })
}

proptest! {
    #[test]
    fn a_patched_pod_image_is_the_status_image_of_every_class_it_may_run_on(
        nodes in arb_nodes(),
        images in prop::collection::vec(0..IMAGES.len(), FLAVORS.len()),
        weights in prop::collection::vec(-2..3i32, FLAVORS.len()),
        fallback in any::<bool>(),
        spec in arb_pod_spec(),
    ) {
        let table: Vec<(&str, Option<&str>, i32)> = FLAVORS
            .iter()
            .zip(&images)
            .zip(&weights)
            .map(|((flavor, image), weight)| (*flavor, IMAGES[*image], *weight))
            .collect();
        let mut policy = policy("p", if fallback { json!({"fallbackImage": "busybox:1"}) } else { json!({}) });
        policy.status = Some(status_over(&policy, &nodes, &table));
        let index = index_over(std::slice::from_ref(&policy), &nodes);
        let pod = simple_pod(json!({}), spec);
        let plan = index.plan(&request(&pod, false));
        let ImagePlan::Patch { decision, .. } = &plan else {
            return Ok(());
        };
        let after = patched(&pod, &plan);
        let image = image_of(&after, "app");
        let placement = Placement::from_pod_spec(after.spec.as_ref().unwrap()).unwrap();
        let candidates = nodes
            .iter()
            .filter(|(name, inputs)| placement.matches(&node_meta(name, &inputs.labels)))
            .map(|(name, inputs)| (name.as_str(), inputs));
        let classes = group(&flavor_reads(), candidates);
        prop_assert!(!classes.is_empty());
        let status = policy.status.as_ref().unwrap();
        let by_name: BTreeMap<&str, Option<&str>> = status
            .classes
            .iter()
            .map(|c| (c.name.as_str(), c.image.as_deref()))
            .collect();
        for class in &classes {
            let expected = match decision {
                Decision::Fallback => None,
                _ => Some(image.as_str()),
            };
            prop_assert_eq!(by_name[class.name.as_str()], expected, "class {}", class.name);
        }
        // The pod was not narrowed further than needed: every candidate node of the chosen
        // image's classes before pinning is still a candidate.
        if *decision == Decision::Pinned {
            let before = Placement::from_pod_spec(pod.spec.as_ref().unwrap()).unwrap();
            for (name, inputs) in &nodes {
                let meta = node_meta(name, &inputs.labels);
                let class = group(&flavor_reads(), [(name.as_str(), inputs)]);
                if before.matches(&meta) && by_name[class[0].name.as_str()] == Some(image.as_str()) {
                    prop_assert!(placement.matches(&meta), "{name} lost by pinning");
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn asking_one_node_per_class_finds_the_classes_the_walk_finds(
        nodes in arb_nodes(),
        spec in arb_pod_spec(),
    ) {
        let mut policy = policy("p", json!({}));
        policy.status = Some(status_over(&policy, &nodes, &[]));
        let index = index_over(std::slice::from_ref(&policy), &nodes);
        let pod = simple_pod(json!({}), spec);
        let spec = pod.spec.as_ref().unwrap();
        let placement = Placement::from_pod_spec(spec).unwrap();
        // With flavor terms only, `candidates` asks one node per class; with a zone selector or
        // a node name, it walks every node.
        let grouping = &index.groupings[0];
        prop_assert_eq!(
            index.candidates(grouping, &placement, spec),
            index.candidates_by_node(grouping, &placement)
        );
    }
}
