//! Node and node-affinity builders for unit tests of node classes and placement: a node's
//! metadata with labels, a selector requirement, a term, a required affinity and its terms.

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A node's metadata: its name and labels.
pub fn node(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

/// A node selector requirement (`values` empty: none).
pub fn req(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
    }
}

/// A term of expressions and fields (either empty: none).
pub fn term(
    expressions: Vec<NodeSelectorRequirement>,
    fields: Vec<NodeSelectorRequirement>,
) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: (!expressions.is_empty()).then_some(expressions),
        match_fields: (!fields.is_empty()).then_some(fields),
    }
}

/// A term of expressions only.
pub fn exprs(requirements: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    term(requirements, Vec::new())
}

/// The terms of an affinity's required node affinity.
pub fn required_terms(affinity: &Affinity) -> &[NodeSelectorTerm] {
    &affinity
        .node_affinity
        .as_ref()
        .expect("a node affinity")
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .expect("required terms")
        .node_selector_terms
}

/// A required node affinity of `terms`.
pub fn required(terms: Vec<NodeSelectorTerm>) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: terms,
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    }
}
