//! Narrowing over generated pods and nodes: exactly the old candidates with a required value
//! remain, terms are only appended to (what the apiserver accepts on a gated pod), a second
//! narrowing changes nothing, and "unsatisfiable" is never said of a pod some node could take.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use proptest::prelude::*;

use crate::classes::selection::Placement;
use crate::classes::selection::narrow;
use ocifit_testkit::affinity::{node, req, required, term};

const ARCHES: [&str; 3] = ["amd64", "arm64", "s390x"];
const OSES: [&str; 2] = ["linux", "windows"];
const ZONES: [&str; 2] = ["a", "b"];
const ARCH: &str = "kubernetes.io/arch";
const OS: &str = "kubernetes.io/os";

fn arb_requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    (
        0..3usize,
        0..4usize,
        proptest::collection::vec(0..3usize, 1..3),
    )
        .prop_map(|(key, operator, picks)| {
            let (key, pool): (&str, &[&str]) = match key {
                0 => (ARCH, &ARCHES),
                1 => (OS, &OSES),
                _ => ("zone", &ZONES),
            };
            let values: Vec<&str> = picks.iter().map(|p| pool[p % pool.len()]).collect();
            match operator {
                0 => req(key, "In", &values),
                1 => req(key, "NotIn", &values),
                2 => req(key, "Exists", &[]),
                _ => req(key, "DoesNotExist", &[]),
            }
        })
}

fn arb_terms() -> impl Strategy<Value = Option<Vec<NodeSelectorTerm>>> {
    proptest::option::of(proptest::collection::vec(
        proptest::collection::vec(arb_requirement(), 0..3).prop_map(|e| term(e, Vec::new())),
        1..4,
    ))
}

fn arb_required() -> impl Strategy<Value = BTreeMap<String, BTreeSet<String>>> {
    (
        proptest::collection::btree_set(0..ARCHES.len(), 1..3),
        proptest::option::of(proptest::collection::btree_set(0..OSES.len(), 1..3)),
    )
        .prop_map(|(arches, oses)| {
            let mut required = BTreeMap::from([(
                ARCH.to_owned(),
                arches.iter().map(|i| ARCHES[*i].to_owned()).collect(),
            )]);
            if let Some(oses) = oses {
                required.insert(
                    OS.to_owned(),
                    oses.iter().map(|i| OSES[*i].to_owned()).collect(),
                );
            }
            required
        })
}

/// Every node over the three keys, each label present or absent.
fn universe() -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta> {
    let mut nodes = Vec::new();
    for arch in ARCHES.iter().map(Some).chain([None]) {
        for os in OSES.iter().map(Some).chain([None]) {
            for zone in ZONES.iter().map(Some).chain([None]) {
                let mut labels = Vec::new();
                labels.extend(arch.map(|v| (ARCH, *v)));
                labels.extend(os.map(|v| (OS, *v)));
                labels.extend(zone.map(|v| ("zone", *v)));
                nodes.push(node(&format!("n{}", nodes.len()), &labels));
            }
        }
    }
    nodes
}

proptest! {
    #[test]
    fn narrowing_keeps_exactly_the_candidates_with_required_values(
        terms in arb_terms(),
        selector_arch in proptest::option::of(0..ARCHES.len()),
        required_values in arb_required(),
    ) {
        let node_selector = selector_arch
            .map(|i| BTreeMap::from([(ARCH.to_owned(), ARCHES[i].to_owned())]));
        let affinity = terms.clone().map(required);
        let spec = PodSpec {
            affinity: affinity.clone(),
            node_selector: node_selector.clone(),
            ..PodSpec::default()
        };
        let before = Placement::from_pod_spec(&spec).unwrap();
        let narrowed = narrow(affinity.as_ref(), node_selector.as_ref(), &required_values).unwrap();
        let after = Placement::from_pod_spec(&PodSpec {
            affinity: Some(narrowed.affinity.clone()),
            ..spec.clone()
        })
        .unwrap();

        let mut any = false;
        for candidate in universe() {
            let has_values = required_values.iter().all(|(key, values)| {
                candidate
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(key))
                    .is_some_and(|value| values.contains(value))
            });
            let expected = before.matches(&candidate) && has_values;
            prop_assert_eq!(after.matches(&candidate), expected, "{:?}", candidate.labels);
            any |= expected;
        }
        if !narrowed.satisfiable {
            prop_assert!(!any, "called unsatisfiable, yet a node fits");
        }

        // The apiserver's rule for gated pods: same number of terms, each only appended to.
        if let Some(old_terms) = &terms {
            let new_terms = super::required_terms(&narrowed.affinity);
            prop_assert_eq!(old_terms.len(), new_terms.len());
            for (old, new) in old_terms.iter().zip(new_terms) {
                let old_expressions = old.match_expressions.clone().unwrap_or_default();
                let new_expressions = new.match_expressions.clone().unwrap_or_default();
                prop_assert!(new_expressions.starts_with(&old_expressions));
                prop_assert_eq!(&old.match_fields, &new.match_fields);
            }
        }

        let again = narrow(Some(&narrowed.affinity), node_selector.as_ref(), &required_values).unwrap();
        prop_assert_eq!(again.affinity, narrowed.affinity);
    }
}
