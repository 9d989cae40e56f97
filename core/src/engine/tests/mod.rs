//! Engine tests: operators of both formats, validation messages, best fit, candidates mode,
//! explanations, node inputs, and the example artifacts under `example/`.

mod examples;
mod inputs;
mod limits;
mod nfd_ops;
mod ocifit_ops;
mod select;
mod validation;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Artifact, Explanation, Features, Format, NodeInputs, any_platform};

/// Labels from pairs.
pub(super) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A node with these labels and no NodeFeature object.
pub(super) fn node(pairs: &[(&str, &str)]) -> NodeInputs {
    NodeInputs::new(labels(pairs))
}

/// A node with NodeFeature features given in NFD's JSON shape.
pub(super) fn featured(features: Value) -> NodeInputs {
    NodeInputs::new(BTreeMap::new()).with_features(Some(
        serde_json::from_value::<Features>(features).expect("features in NFD's shape"),
    ))
}

/// Parses a document given as JSON in either format.
pub(super) fn parse(format: Format, doc: &Value) -> Artifact {
    Artifact::parse(format, doc.to_string().as_bytes()).expect("a valid artifact")
}

/// The error message of a document that must not parse.
pub(super) fn parse_error(format: Format, doc: &Value) -> String {
    match Artifact::parse(format, doc.to_string().as_bytes()) {
        Ok(_) => panic!("parsed, but should not: {doc}"),
        Err(e) => e.to_string(),
    }
}

/// Best fit with no platform filter.
pub(super) fn fit(artifact: &Artifact, node: &NodeInputs) -> Explanation {
    artifact.best_fit(node, any_platform)
}

/// An ocifit artifact with one set holding one expression.
pub(super) fn ocifit_one(expression: Value) -> Artifact {
    parse(
        Format::Ocifit,
        &json!({"version": "v1alpha1", "compatibilities": [{"tag": "img:1", "rules": [
            {"matchFeatures": [{"matchExpressions": [expression]}]}]}]}),
    )
}

/// An NFD artifact with one set holding one rule made of these terms.
pub(super) fn nfd_terms(terms: Value) -> Artifact {
    parse(
        Format::Nfd,
        &json!({"version": "v1alpha1", "compatibilities": [{"tag": "img:1", "rules": [
            {"name": "r", "matchFeatures": terms}]}]}),
    )
}
