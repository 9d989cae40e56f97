use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, PodAffinity, PodAffinityTerm, PreferredSchedulingTerm,
};

use super::*;
use ocifit_testkit::affinity::{exprs, req, required, term};

fn labels(pairs: &[(&str, Option<&str>)]) -> ClassSelector {
    ClassSelector::Labels(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
            .collect(),
    )
}

fn names(names: &[&str]) -> ClassSelector {
    ClassSelector::NodeNames(names.iter().map(|n| (*n).to_owned()).collect())
}

fn pinned(affinity: Option<&Affinity>, classes: &[ClassSelector]) -> Affinity {
    pin(affinity, classes)
        .expect("pinning succeeds")
        .expect("pinning yields an affinity")
}

#[test]
fn pod_without_affinity_gets_one_sorted_term_per_class() {
    let classes = [
        labels(&[("zone", Some("b")), ("gpu", None)]),
        labels(&[("zone", Some("a")), ("gpu", Some("x"))]),
    ];
    let expected = required(vec![
        exprs(vec![
            req("gpu", "DoesNotExist", &[]),
            req("zone", "In", &["b"]),
        ]),
        exprs(vec![req("gpu", "In", &["x"]), req("zone", "In", &["a"])]),
    ]);
    assert_eq!(pinned(None, &classes), expected);
    assert_eq!(pinned(Some(&Affinity::default()), &classes), expected);
}

#[test]
fn every_existing_term_is_crossed_with_every_class() {
    let existing = required(vec![
        exprs(vec![req("disktype", "In", &["ssd"])]),
        exprs(vec![req("cores", "Gt", &["2"])]),
    ]);
    let classes = [
        labels(&[("zone", Some("b"))]),
        labels(&[("zone", Some("a"))]),
    ];
    assert_eq!(
        pinned(Some(&existing), &classes),
        required(vec![
            exprs(vec![
                req("disktype", "In", &["ssd"]),
                req("zone", "In", &["a"])
            ]),
            exprs(vec![
                req("disktype", "In", &["ssd"]),
                req("zone", "In", &["b"])
            ]),
            exprs(vec![req("cores", "Gt", &["2"]), req("zone", "In", &["a"])]),
            exprs(vec![req("cores", "Gt", &["2"]), req("zone", "In", &["b"])]),
        ])
    );
}

#[test]
fn combinations_no_node_can_satisfy_are_left_out() {
    let existing = required(vec![
        exprs(vec![
            req("zone", "NotIn", &["b"]),
            req("cores", "Exists", &[]),
        ]),
        exprs(vec![req("gpu", "Exists", &[])]),
        term(vec![], vec![]),
    ]);
    let classes = [
        labels(&[("zone", Some("a")), ("gpu", None)]),
        labels(&[("zone", Some("b")), ("gpu", None)]),
    ];
    assert_eq!(
        pinned(Some(&existing), &classes),
        required(vec![exprs(vec![
            req("zone", "NotIn", &["b"]),
            req("cores", "Exists", &[]),
            req("gpu", "DoesNotExist", &[]),
            req("zone", "In", &["a"]),
        ])])
    );
}

#[test]
fn term_already_requiring_a_class_is_kept_verbatim() {
    let existing = required(vec![
        exprs(vec![
            req("zone", "In", &["a"]),
            req("disktype", "In", &["ssd"]),
        ]),
        exprs(vec![req("cores", "Gt", &["2"])]),
    ]);
    let classes = [
        labels(&[("zone", Some("a"))]),
        labels(&[("zone", Some("b"))]),
    ];
    assert_eq!(
        pinned(Some(&existing), &classes),
        required(vec![
            exprs(vec![
                req("zone", "In", &["a"]),
                req("disktype", "In", &["ssd"])
            ]),
            exprs(vec![req("cores", "Gt", &["2"]), req("zone", "In", &["a"])]),
            exprs(vec![req("cores", "Gt", &["2"]), req("zone", "In", &["b"])]),
        ])
    );
}

#[test]
fn class_described_by_names_pins_one_match_fields_term_per_node() {
    let classes = [names(&["n2", "n1"])];
    assert_eq!(
        pinned(None, &classes),
        required(vec![
            term(vec![], vec![req("metadata.name", "In", &["n1"])]),
            term(vec![], vec![req("metadata.name", "In", &["n2"])]),
        ])
    );
    let existing = required(vec![term(
        vec![req("zone", "In", &["a"])],
        vec![req("metadata.name", "NotIn", &["n1"])],
    )]);
    assert_eq!(
        pinned(Some(&existing), &classes),
        required(vec![term(
            vec![req("zone", "In", &["a"])],
            vec![
                req("metadata.name", "NotIn", &["n1"]),
                req("metadata.name", "In", &["n2"]),
            ],
        )])
    );
}

#[test]
fn labels_and_names_classes_mix() {
    let classes = [names(&["n9"]), labels(&[("zone", Some("a"))])];
    let existing = required(vec![exprs(vec![req("cores", "Exists", &[])])]);
    assert_eq!(
        pinned(Some(&existing), &classes),
        required(vec![
            exprs(vec![req("cores", "Exists", &[]), req("zone", "In", &["a"])]),
            term(
                vec![req("cores", "Exists", &[])],
                vec![req("metadata.name", "In", &["n9"])]
            ),
        ])
    );
}

#[test]
fn pinning_twice_changes_nothing_the_second_time() {
    let classes = [
        labels(&[("zone", Some("a")), ("gpu", None)]),
        labels(&[("zone", Some("b")), ("gpu", Some("x"))]),
        names(&["n7", "n8"]),
    ];
    let inputs = [
        None,
        Some(required(vec![
            exprs(vec![req("disktype", "In", &["ssd", "nvme"])]),
            term(
                vec![req("zone", "NotIn", &["c"])],
                vec![req("metadata.name", "NotIn", &["n7"])],
            ),
        ])),
    ];
    for input in inputs {
        let once = pinned(input.as_ref(), &classes);
        assert_eq!(pinned(Some(&once), &classes), once);
    }
}

#[test]
fn affinity_pinned_by_hand_to_the_same_classes_is_returned_unchanged() {
    let by_hand = required(vec![
        exprs(vec![req("zone", "In", &["b"])]),
        exprs(vec![
            req("disktype", "In", &["ssd"]),
            req("zone", "In", &["a"]),
        ]),
        term(vec![], vec![req("metadata.name", "In", &["n1"])]),
    ]);
    let classes = [
        labels(&[("zone", Some("a"))]),
        labels(&[("zone", Some("b"))]),
        names(&["n1"]),
    ];
    assert_eq!(pinned(Some(&by_hand), &classes), by_hand);
}

#[test]
fn preferred_node_affinity_and_pod_affinity_are_kept() {
    let preferred = vec![PreferredSchedulingTerm {
        weight: 10,
        preference: exprs(vec![req("disktype", "In", &["ssd"])]),
    }];
    let pod_affinity = PodAffinity {
        required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
            topology_key: "kubernetes.io/hostname".to_owned(),
            ..PodAffinityTerm::default()
        }]),
        ..PodAffinity::default()
    };
    let existing = Affinity {
        node_affinity: Some(NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(preferred.clone()),
            required_during_scheduling_ignored_during_execution: None,
        }),
        pod_affinity: Some(pod_affinity.clone()),
        pod_anti_affinity: None,
    };
    let result = pinned(Some(&existing), &[labels(&[("zone", Some("a"))])]);
    let mut expected = required(vec![exprs(vec![req("zone", "In", &["a"])])]);
    expected.pod_affinity = Some(pod_affinity);
    if let Some(node_affinity) = expected.node_affinity.as_mut() {
        node_affinity.preferred_during_scheduling_ignored_during_execution = Some(preferred);
    }
    assert_eq!(result, expected);
}

#[test]
fn class_constraining_nothing_leaves_affinity_as_it_is() {
    let everything = labels(&[]);
    assert_eq!(pin(None, std::slice::from_ref(&everything)), Ok(None));
    let existing = required(vec![exprs(vec![req("cores", "Exists", &[])])]);
    assert_eq!(
        pin(
            Some(&existing),
            &[everything, labels(&[("zone", Some("a"))])]
        ),
        Ok(Some(existing))
    );
}

#[test]
fn pinning_that_leaves_no_node_is_an_error() {
    let zone_a = required(vec![exprs(vec![req("zone", "In", &["a"])])]);
    let only_empty_terms = required(vec![term(vec![], vec![])]);
    let no_terms = required(vec![]);
    let zone_b = [labels(&[("zone", Some("b"))])];
    assert_eq!(
        pin(Some(&zone_a), &zone_b),
        Err(SelectionError::PinMatchesNoNode)
    );
    assert_eq!(
        pin(Some(&only_empty_terms), &zone_b),
        Err(SelectionError::PinMatchesNoNode)
    );
    assert_eq!(
        pin(Some(&no_terms), &zone_b),
        Err(SelectionError::PinMatchesNoNode)
    );
    assert_eq!(
        pin(None, &[names(&[])]),
        Err(SelectionError::PinMatchesNoNode)
    );
    assert_eq!(pin(None, &[]), Err(SelectionError::NoTargetClass));
}

#[test]
fn invalid_existing_affinity_is_reported_not_pinned() {
    let existing = required(vec![exprs(vec![req("zone", "Equals", &["a"])])]);
    let error = pin(Some(&existing), &[labels(&[("zone", Some("a"))])]).expect_err("invalid");
    assert!(error.to_string().starts_with(
        "invalid required node affinity: nodeSelectorTerms[0].matchExpressions[0] (zone Equals [a])"
    ));
}

mod property;
mod require;
