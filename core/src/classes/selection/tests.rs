use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use kube_core::{ObjectMeta, PartialObjectMeta};
use ocifit_testkit::affinity::{exprs, node, req, required, term};

use super::*;

fn spec(node_selector: &[(&str, &str)], terms: Option<Vec<NodeSelectorTerm>>) -> PodSpec {
    PodSpec {
        node_selector: (!node_selector.is_empty()).then(|| {
            node_selector
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        }),
        affinity: terms.map(required),
        ..PodSpec::default()
    }
}

fn inventory() -> Vec<ObjectMeta> {
    vec![
        node("n1", &[("zone", "a"), ("disktype", "ssd"), ("cores", "4")]),
        node("n2", &[("zone", "b"), ("cores", "8")]),
        node("n3", &[("zone", "c"), ("gpu", "x"), ("cores", "many")]),
        node("n4", &[]),
    ]
}

fn candidate_names(spec: &PodSpec) -> Vec<String> {
    let nodes = inventory();
    let placement = Placement::from_pod_spec(spec).expect("valid placement");
    placement
        .candidates(&nodes)
        .into_iter()
        .map(|n| NodeView::name(n).to_owned())
        .collect()
}

#[test]
fn each_operator_selects_every_node_it_holds_for() {
    let cases: Vec<(NodeSelectorRequirement, &[&str])> = vec![
        (req("zone", "In", &["a", "b"]), &["n1", "n2"]),
        // NotIn also holds where the label is absent.
        (req("zone", "NotIn", &["a"]), &["n2", "n3", "n4"]),
        (req("gpu", "Exists", &[]), &["n3"]),
        (req("gpu", "DoesNotExist", &[]), &["n1", "n2", "n4"]),
        // Gt and Lt skip nodes whose label is absent (n4) or not an integer (n3).
        (req("cores", "Gt", &["4"]), &["n2"]),
        (req("cores", "Lt", &["8"]), &["n1"]),
        (req("cores", "Gt", &["-1"]), &["n1", "n2"]),
        (req("cores", "Lt", &["+5"]), &["n1"]),
        (req("metadata.name", "In", &["n2"]), &["n2"]),
        (req("metadata.name", "NotIn", &["n2"]), &["n1", "n3", "n4"]),
    ];
    for (requirement, expected) in cases {
        let term = if requirement.key == "metadata.name" {
            term(vec![], vec![requirement.clone()])
        } else {
            exprs(vec![requirement.clone()])
        };
        let found = candidate_names(&spec(&[], Some(vec![term])));
        assert_eq!(found, expected, "{requirement:?}");
    }
}

#[test]
fn terms_are_ored_and_requirements_within_a_term_anded() {
    let zone = |values: &[&str]| req("zone", "In", values);
    let not_n1 = req("metadata.name", "NotIn", &["n1"]);
    let cases: Vec<(&str, Vec<NodeSelectorTerm>, &[&str])> = vec![
        (
            "an empty term matches no node",
            vec![term(vec![], vec![])],
            &[],
        ),
        ("an empty list of terms matches no node", vec![], &[]),
        (
            "an empty term does not hide the others",
            vec![term(vec![], vec![]), exprs(vec![zone(&["c"])])],
            &["n3"],
        ),
        (
            "terms are ORed",
            vec![
                exprs(vec![zone(&["a"])]),
                exprs(vec![req("gpu", "Exists", &[])]),
            ],
            &["n1", "n3"],
        ),
        (
            "expressions are ANDed",
            vec![exprs(vec![zone(&["a", "b"]), req("cores", "Gt", &["5"])])],
            &["n2"],
        ),
        (
            "fields and expressions are ANDed",
            vec![term(vec![zone(&["a", "b"])], vec![not_n1])],
            &["n2"],
        ),
    ];
    for (behaviour, terms, expected) in cases {
        assert_eq!(
            candidate_names(&spec(&[], Some(terms))),
            expected,
            "{behaviour}"
        );
    }
}

#[test]
fn node_selector_is_anded_with_required_affinity() {
    let zone_b = || Some(vec![exprs(vec![req("zone", "In", &["b"])])]);
    let cores = || Some(vec![exprs(vec![req("cores", "Exists", &[])])]);
    let cases: Vec<(PodSpec, &[&str])> = vec![
        (spec(&[], None), &["n1", "n2", "n3", "n4"]),
        (spec(&[("zone", "a")], None), &["n1"]),
        (spec(&[("zone", "a"), ("cores", "8")], None), &[]),
        (spec(&[("disktype", "ssd")], cores()), &["n1"]),
        (spec(&[("zone", "a")], zone_b()), &[]),
        (spec(&[("zone", "a")], Some(vec![])), &[]),
    ];
    for (spec, expected) in cases {
        assert_eq!(candidate_names(&spec), expected, "{spec:?}");
    }
}

#[test]
fn invalid_requirements_are_denied_with_term_and_requirement_named() {
    let cases: Vec<(Vec<NodeSelectorTerm>, &str)> = vec![
        (
            vec![exprs(vec![req("zone", "Equals", &["a"])])],
            r#"nodeSelectorTerms[0].matchExpressions[0] (zone Equals [a]): operator "Equals" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt"#,
        ),
        (
            vec![exprs(vec![req("zone", "in", &["a"])])],
            r#"nodeSelectorTerms[0].matchExpressions[0] (zone in [a]): operator "in" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt"#,
        ),
        (
            vec![exprs(vec![req("zone", "In", &[])])],
            "nodeSelectorTerms[0].matchExpressions[0] (zone In []): operator In needs at least one value",
        ),
        (
            vec![exprs(vec![NodeSelectorRequirement {
                values: Some(vec![]),
                ..req("zone", "NotIn", &[])
            }])],
            "nodeSelectorTerms[0].matchExpressions[0] (zone NotIn []): operator NotIn needs at least one value",
        ),
        (
            vec![exprs(vec![req("gpu", "Exists", &["x"])])],
            "nodeSelectorTerms[0].matchExpressions[0] (gpu Exists [x]): operator Exists takes no values, got 1",
        ),
        (
            vec![exprs(vec![req("gpu", "DoesNotExist", &["x", "y"])])],
            "nodeSelectorTerms[0].matchExpressions[0] (gpu DoesNotExist [x, y]): operator DoesNotExist takes no values, got 2",
        ),
        (
            vec![exprs(vec![req("cores", "Gt", &["1", "2"])])],
            "nodeSelectorTerms[0].matchExpressions[0] (cores Gt [1, 2]): operator Gt needs exactly one value, got 2",
        ),
        (
            vec![exprs(vec![req("cores", "Lt", &[])])],
            "nodeSelectorTerms[0].matchExpressions[0] (cores Lt []): operator Lt needs exactly one value, got 0",
        ),
        (
            vec![exprs(vec![req("cores", "Gt", &["four"])])],
            r#"nodeSelectorTerms[0].matchExpressions[0] (cores Gt [four]): value "four" is not an integer"#,
        ),
        (
            vec![exprs(vec![req("cores", "Lt", &["1.5"])])],
            r#"nodeSelectorTerms[0].matchExpressions[0] (cores Lt [1.5]): value "1.5" is not an integer"#,
        ),
        (
            vec![
                exprs(vec![req("zone", "In", &["a"])]),
                term(vec![], vec![req("metadata.uid", "In", &["x"])]),
            ],
            r#"nodeSelectorTerms[1].matchFields[0] (metadata.uid In [x]): field "metadata.uid" is not supported, matchFields can only read metadata.name"#,
        ),
        (
            vec![term(vec![], vec![req("metadata.name", "Exists", &[])])],
            r#"nodeSelectorTerms[0].matchFields[0] (metadata.name Exists): operator "Exists" is not one of In, NotIn"#,
        ),
        (
            vec![term(
                vec![],
                vec![req("metadata.name", "In", &["n1", "n2"])],
            )],
            "nodeSelectorTerms[0].matchFields[0] (metadata.name In [n1, n2]): operator In needs exactly one value, got 2",
        ),
        (
            vec![
                exprs(vec![req("zone", "In", &["a"])]),
                term(vec![], vec![]),
                exprs(vec![
                    req("zone", "In", &["a"]),
                    req("gpu", "Exists", &[]),
                    req("cores", "Gt", &[]),
                ]),
            ],
            "nodeSelectorTerms[2].matchExpressions[2] (cores Gt []): operator Gt needs exactly one value, got 0",
        ),
    ];
    for (terms, expected) in cases {
        let error = Placement::from_pod_spec(&spec(&[], Some(terms))).expect_err(expected);
        assert_eq!(
            error.to_string(),
            format!("invalid required node affinity: {expected}")
        );
    }
}

#[test]
fn invalid_term_is_an_error_even_when_another_term_matches() {
    let spec = spec(
        &[],
        Some(vec![
            exprs(vec![req("zone", "In", &["a"])]),
            exprs(vec![req("cores", "Gt", &["x"])]),
        ]),
    );
    assert!(matches!(
        Placement::from_pod_spec(&spec),
        Err(SelectionError::InvalidRequirement {
            term: 1,
            list: RequirementList::MatchExpressions,
            index: 0,
            problem: RequirementProblem::NotAnInteger { .. },
            ..
        })
    ));
}

#[test]
fn description_names_node_selector_and_each_term() {
    let cases: Vec<(PodSpec, &str)> = vec![
        (spec(&[], None), "any node"),
        (
            spec(&[("zone", "a"), ("disktype", "ssd")], None),
            "nodeSelector {disktype=ssd, zone=a}",
        ),
        (
            spec(
                &[("disktype", "ssd")],
                Some(vec![
                    exprs(vec![req("zone", "In", &["a", "b"])]),
                    exprs(vec![req("gpu", "Exists", &[]), req("cores", "Gt", &["4"])]),
                ]),
            ),
            "nodeSelector {disktype=ssd} and affinity (zone In [a, b]) or (gpu Exists and cores Gt 4)",
        ),
        (
            spec(
                &[],
                Some(vec![term(
                    vec![
                        req("zone", "NotIn", &["c"]),
                        req("gpu", "DoesNotExist", &[]),
                        req("cores", "Lt", &["8"]),
                    ],
                    vec![req("metadata.name", "NotIn", &["n1"])],
                )]),
            ),
            "affinity (zone NotIn [c] and gpu DoesNotExist and cores Lt 8 and metadata.name NotIn [n1])",
        ),
        (
            spec(
                &[],
                Some(vec![
                    term(vec![], vec![]),
                    term(vec![], vec![req("metadata.name", "In", &["n2"])]),
                ]),
            ),
            "affinity (empty term, matches no node) or (metadata.name In [n2])",
        ),
        (
            spec(&[("zone", "a")], Some(vec![])),
            "nodeSelector {zone=a} and affinity with no terms (matches no node)",
        ),
    ];
    for (spec, expected) in cases {
        let placement = Placement::from_pod_spec(&spec).expect("valid placement");
        assert_eq!(placement.to_string(), expected);
    }
}

#[test]
fn nodes_and_node_metadata_select_like_their_object_meta() {
    let spec = spec(
        &[],
        Some(vec![term(
            vec![req("zone", "In", &["a", "b"])],
            vec![req("metadata.name", "NotIn", &["n2"])],
        )]),
    );
    let placement = Placement::from_pod_spec(&spec).expect("valid placement");
    let metas = inventory();
    let nodes: Vec<Node> = metas
        .iter()
        .map(|metadata| Node {
            metadata: metadata.clone(),
            ..Node::default()
        })
        .collect();
    let partials: Vec<PartialObjectMeta<Node>> = metas
        .iter()
        .map(|metadata| PartialObjectMeta {
            metadata: metadata.clone(),
            ..PartialObjectMeta::default()
        })
        .collect();
    let names = |found: Vec<&str>| found.into_iter().map(str::to_owned).collect::<Vec<_>>();
    let expected = vec!["n1".to_owned()];
    assert_eq!(
        names(
            placement
                .candidates(&metas)
                .into_iter()
                .map(NodeView::name)
                .collect()
        ),
        expected
    );
    assert_eq!(
        names(
            placement
                .candidates(&nodes)
                .into_iter()
                .map(NodeView::name)
                .collect()
        ),
        expected
    );
    assert_eq!(
        names(
            placement
                .candidates(&partials)
                .into_iter()
                .map(NodeView::name)
                .collect()
        ),
        expected
    );
}

/// The size limits of a selection.
mod limits {
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };

    use super::*;

    fn spec(terms: usize, expressions: usize, values: usize, selector: usize) -> PodSpec {
        let requirement = NodeSelectorRequirement {
            key: "zone".into(),
            operator: "NotIn".into(),
            values: Some((0..values).map(|i| format!("z{i}")).collect()),
        };
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![requirement; expressions]),
            match_fields: None,
        };
        PodSpec {
            node_selector: Some(
                (0..selector)
                    .map(|i| (format!("k{i}"), "v".into()))
                    .collect(),
            ),
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![term; terms],
                    }),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            ..PodSpec::default()
        }
    }

    fn refused(spec: &PodSpec) -> String {
        Placement::from_pod_spec(spec).unwrap_err().to_string()
    }

    #[test]
    fn selections_up_to_the_limits_are_planned() {
        assert!(Placement::from_pod_spec(&spec(1, 1, MAX_VALUES, 0)).is_ok());
        assert!(Placement::from_pod_spec(&spec(MAX_TERMS, 1, 1, 0)).is_ok());
        assert!(Placement::from_pod_spec(&spec(1, MAX_REQUIREMENTS - 8, 1, 8)).is_ok());
    }

    #[test]
    fn a_selection_over_a_limit_is_refused_naming_it() {
        assert_eq!(
            refused(&spec(1, 1, 100_000, 0)),
            "the pod's node selection is too large to plan: 100000 values in its required node \
             affinity, over ocifit's limit of 2048"
        );
        assert!(refused(&spec(MAX_TERMS + 1, 1, 1, 0)).contains("65 terms"));
        assert!(
            refused(&spec(1, MAX_REQUIREMENTS, 1, 1))
                .contains("513 requirements (nodeSelector entries and affinity expressions)")
        );
    }
}
