use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, PodSpec, PreferredSchedulingTerm};

use super::narrow;
use crate::classes::selection::{Placement, SelectionError};
use ocifit_testkit::affinity::{exprs, node, req, required, required_terms, term};

mod property;

fn arch(values: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    BTreeMap::from([(
        "kubernetes.io/arch".to_owned(),
        values.iter().map(|v| (*v).to_owned()).collect(),
    )])
}

#[test]
fn a_pod_without_affinity_gets_one_term_of_the_requirements() {
    let narrowed = narrow(None, None, &arch(&["arm64", "amd64"])).unwrap();
    assert!(narrowed.satisfiable);
    assert_eq!(
        required_terms(&narrowed.affinity),
        [exprs(vec![req(
            "kubernetes.io/arch",
            "In",
            &["amd64", "arm64"]
        )])]
    );
}

#[test]
fn every_existing_term_gets_the_requirement_and_no_term_is_added() {
    let affinity = required(vec![
        exprs(vec![req("zone", "In", &["a"])]),
        term(Vec::new(), vec![req("metadata.name", "In", &["n1"])]),
    ]);
    let narrowed = narrow(Some(&affinity), None, &arch(&["arm64"])).unwrap();
    assert_eq!(
        required_terms(&narrowed.affinity),
        [
            exprs(vec![
                req("zone", "In", &["a"]),
                req("kubernetes.io/arch", "In", &["arm64"])
            ]),
            term(
                vec![req("kubernetes.io/arch", "In", &["arm64"])],
                vec![req("metadata.name", "In", &["n1"])]
            ),
        ]
    );
}

#[test]
fn a_users_own_architecture_requirement_is_kept_and_intersected() {
    let affinity = required(vec![exprs(vec![req(
        "kubernetes.io/arch",
        "In",
        &["amd64", "s390x"],
    )])]);
    let narrowed = narrow(Some(&affinity), None, &arch(&["amd64", "arm64"])).unwrap();
    assert!(narrowed.satisfiable, "amd64 is in both");
    assert_eq!(
        required_terms(&narrowed.affinity),
        [exprs(vec![
            req("kubernetes.io/arch", "In", &["amd64", "s390x"]),
            req("kubernetes.io/arch", "In", &["amd64", "arm64"]),
        ])]
    );
}

#[test]
fn requirements_that_exclude_every_required_value_are_unsatisfiable() {
    let only_s390x = required(vec![exprs(vec![req(
        "kubernetes.io/arch",
        "In",
        &["s390x"],
    )])]);
    assert!(
        !narrow(Some(&only_s390x), None, &arch(&["amd64"]))
            .unwrap()
            .satisfiable
    );
    let selector = BTreeMap::from([("kubernetes.io/arch".to_owned(), "s390x".to_owned())]);
    assert!(
        !narrow(None, Some(&selector), &arch(&["amd64"]))
            .unwrap()
            .satisfiable
    );
    let not_amd = required(vec![
        exprs(vec![req("kubernetes.io/arch", "NotIn", &["amd64"])]),
        exprs(vec![req("zone", "In", &["a"])]),
    ]);
    assert!(
        narrow(Some(&not_amd), None, &arch(&["amd64"]))
            .unwrap()
            .satisfiable,
        "the second term still allows amd64"
    );
}

#[test]
fn an_empty_term_stays_empty_so_nothing_excluded_becomes_possible() {
    let affinity = required(vec![exprs(Vec::new())]);
    let narrowed = narrow(Some(&affinity), None, &arch(&["amd64"])).unwrap();
    assert_eq!(required_terms(&narrowed.affinity), [exprs(Vec::new())]);
    assert!(!narrowed.satisfiable);
}

#[test]
fn narrowing_twice_changes_nothing_more() {
    let affinity = required(vec![exprs(vec![req("zone", "In", &["a"])])]);
    let once = narrow(Some(&affinity), None, &arch(&["arm64", "amd64"])).unwrap();
    let twice = narrow(Some(&once.affinity), None, &arch(&["amd64", "arm64"])).unwrap();
    assert_eq!(once, twice);
}

#[test]
fn preferred_affinity_and_pod_affinity_are_carried_over() {
    let affinity = Affinity {
        node_affinity: Some(NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                PreferredSchedulingTerm {
                    weight: 5,
                    preference: exprs(vec![req("zone", "In", &["a"])]),
                },
            ]),
            ..NodeAffinity::default()
        }),
        pod_anti_affinity: Some(Default::default()),
        ..Affinity::default()
    };
    let narrowed = narrow(Some(&affinity), None, &arch(&["amd64"])).unwrap();
    let node_affinity = narrowed.affinity.node_affinity.as_ref().unwrap();
    assert_eq!(
        node_affinity.preferred_during_scheduling_ignored_during_execution,
        affinity
            .node_affinity
            .as_ref()
            .unwrap()
            .preferred_during_scheduling_ignored_during_execution
    );
    assert!(narrowed.affinity.pod_anti_affinity.is_some());
}

#[test]
fn a_malformed_requirement_is_an_error_naming_it() {
    let affinity = required(vec![exprs(vec![req("zone", "In", &[])])]);
    let err = narrow(Some(&affinity), None, &arch(&["amd64"])).unwrap_err();
    assert!(matches!(
        err,
        SelectionError::InvalidRequirement { term: 0, .. }
    ));
}

#[test]
fn the_narrowed_pod_matches_only_nodes_of_the_required_values() {
    let affinity = required(vec![exprs(vec![req("zone", "In", &["a"])])]);
    let narrowed = narrow(Some(&affinity), None, &arch(&["arm64"])).unwrap();
    let placement = Placement::from_pod_spec(&PodSpec {
        affinity: Some(narrowed.affinity),
        ..PodSpec::default()
    })
    .unwrap();
    assert!(placement.matches(&node(
        "n1",
        &[("zone", "a"), ("kubernetes.io/arch", "arm64")]
    )));
    assert!(!placement.matches(&node(
        "n2",
        &[("zone", "a"), ("kubernetes.io/arch", "amd64")]
    )));
    assert!(!placement.matches(&node("n3", &[("zone", "a")])));
}
