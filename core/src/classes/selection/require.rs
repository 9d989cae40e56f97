//! Requiring label values of a pod by narrowing its node affinity in place: `key In [values]`
//! ANDed into every required term, or one new term when the pod has none. Unlike pinning, terms
//! are never added, dropped or rewritten, only requirements appended: the one change the
//! apiserver accepts on a pod held by a scheduling gate. Also tells whether the pod's own
//! requirements (nodeSelector and terms) still leave a node that has the values.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Affinity, NodeSelectorRequirement, NodeSelectorTerm};

use super::SelectionError;
use super::pin::{and_into, required_selector, with_required_terms};
use super::requirement::Term;

/// The pod's new `spec.affinity`, and whether any node can still satisfy it.
#[derive(Debug, Clone, PartialEq)]
pub struct Narrowed {
    /// The pod's `spec.affinity` with the requirements in every required term.
    pub affinity: Affinity,
    /// False when the pod's nodeSelector, or every one of its required terms, asks for a value
    /// of some required key outside the required values: no node could satisfy both.
    pub satisfiable: bool,
}

/// ANDs `key In values` for each entry of `required` into every non-empty required term of
/// `affinity` (or one new term). Empty terms match no node and stay empty, so nothing the pod
/// excluded becomes possible; a second call changes nothing.
pub fn narrow(
    affinity: Option<&Affinity>,
    node_selector: Option<&BTreeMap<String, String>>,
    required: &BTreeMap<String, BTreeSet<String>>,
) -> Result<Narrowed, SelectionError> {
    let expressions: Vec<NodeSelectorRequirement> = required
        .iter()
        .map(|(key, values)| NodeSelectorRequirement {
            key: key.clone(),
            operator: "In".to_owned(),
            values: Some(values.iter().cloned().collect()),
        })
        .collect();
    let selector_allows = required.iter().all(|(key, values)| {
        node_selector
            .and_then(|selector| selector.get(key))
            .is_none_or(|value| values.contains(value))
    });
    let (terms, terms_allow) = match required_selector(affinity) {
        None => (
            vec![and_into(
                &NodeSelectorTerm::default(),
                expressions,
                Vec::new(),
            )],
            true,
        ),
        Some(selector) => {
            let mut terms = Vec::with_capacity(selector.node_selector_terms.len());
            let mut any_allows = false;
            for (index, raw) in selector.node_selector_terms.iter().enumerate() {
                let parsed = Term::parse(index, raw)?;
                if parsed.is_empty() {
                    terms.push(raw.clone());
                    continue;
                }
                any_allows |= allows(&parsed, required);
                terms.push(and_into(raw, expressions.clone(), Vec::new()));
            }
            (terms, any_allows)
        }
    };
    Ok(Narrowed {
        affinity: with_required_terms(affinity, terms),
        satisfiable: selector_allows && terms_allow,
    })
}

/// Whether some node with one of the required values per key can satisfy `term`'s requirements
/// on those keys (keys are independent: each requirement reads one label).
fn allows(term: &Term, required: &BTreeMap<String, BTreeSet<String>>) -> bool {
    required.iter().all(|(key, values)| {
        values.iter().any(|value| {
            term.label_requirements()
                .iter()
                .filter(|requirement| requirement.key() == key)
                .all(|requirement| requirement.matches(Some(value)))
        })
    })
}

#[cfg(test)]
mod tests;
