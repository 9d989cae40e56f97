//! Rewriting a pod's required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`
//! only; the rest is carried over untouched). Pinning (`onUnpinned: Pin`) restricts it to a set of
//! node classes: each existing term ANDed with each class, which keeps exactly the old candidates
//! of a target class; idempotent, so the webhook's reinvocation finds nothing left to patch.
//! Narrowing ([`narrow`]) requires label values in place, `key In [values]` ANDed into every term
//! (or one new term): only requirements appended, the one change the apiserver accepts on a pod
//! held by a scheduling gate; it also tells whether the pod's own requirements still leave a node
//! that has the values.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
};

use super::requirement::{NODE_NAME_FIELD, Term};
use super::{NodeView, SelectionError};

/// The pod's required node affinity, if it has one.
pub(super) fn required_selector(affinity: Option<&Affinity>) -> Option<&NodeSelector> {
    affinity
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .and_then(|node_affinity| {
            node_affinity
                .required_during_scheduling_ignored_during_execution
                .as_ref()
        })
}

/// `affinity` (maybe absent) with its required node affinity replaced by `terms`; everything
/// else carried over.
fn with_required_terms(affinity: Option<&Affinity>, terms: Vec<NodeSelectorTerm>) -> Affinity {
    let mut changed = affinity.cloned().unwrap_or_default();
    changed
        .node_affinity
        .get_or_insert_default()
        .required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: terms,
    });
    changed
}

/// A node class to pin a pod to, described the way required node affinity can express it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassSelector {
    /// The class's value for each label key that tells classes apart, `None` where the class's
    /// nodes lack the label: pinned as `key In [value]` or `key DoesNotExist`.
    Labels(BTreeMap<String, Option<String>>),
    /// The class's nodes by name, for a class its labels cannot describe: pinned as one
    /// alternative per node, `metadata.name In [name]` (matchFields take a single value).
    NodeNames(BTreeSet<String>),
}

impl ClassSelector {
    /// Whether `node` belongs to the class this selector describes.
    pub fn contains<N: NodeView + ?Sized>(&self, node: &N) -> bool {
        match self {
            Self::Labels(labels) => labels
                .iter()
                .all(|(key, value)| node.label(key) == value.as_deref()),
            Self::NodeNames(names) => names.contains(node.name()),
        }
    }

    fn alternatives(&self) -> Vec<Alternative> {
        match self {
            Self::Labels(labels) => vec![Alternative::Labels(
                labels
                    .iter()
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect(),
            )],
            Self::NodeNames(names) => names.iter().cloned().map(Alternative::NodeName).collect(),
        }
    }
}

/// Restricts `affinity` (the pod's `spec.affinity`, maybe absent) to nodes of `classes` and
/// returns the new one: each required term ANDed with each class, terms no node satisfies left
/// out; no required affinity gets a term per class; a class with no labels changes nothing.
pub fn pin(
    affinity: Option<&Affinity>,
    classes: &[ClassSelector],
) -> Result<Option<Affinity>, SelectionError> {
    if classes.is_empty() {
        return Err(SelectionError::NoTargetClass);
    }
    let mut alternatives: Vec<Alternative> = classes
        .iter()
        .flat_map(ClassSelector::alternatives)
        .collect();
    alternatives.sort();
    alternatives.dedup();
    if alternatives.iter().any(Alternative::is_everything) {
        return Ok(affinity.cloned());
    }
    let terms = match required_selector(affinity) {
        None => alternatives
            .iter()
            .map(|alternative| alternative.merged_into(&NodeSelectorTerm::default()))
            .collect(),
        Some(selector) => restrict(&selector.node_selector_terms, &alternatives)?,
    };
    if terms.is_empty() {
        return Err(SelectionError::PinMatchesNoNode);
    }
    Ok(Some(with_required_terms(affinity, terms)))
}

/// The existing terms ANDed with the alternatives, in order, without duplicates.
fn restrict(
    terms: &[NodeSelectorTerm],
    alternatives: &[Alternative],
) -> Result<Vec<NodeSelectorTerm>, SelectionError> {
    let mut restricted: Vec<NodeSelectorTerm> = Vec::new();
    let mut push = |term: NodeSelectorTerm| {
        if !restricted.contains(&term) {
            restricted.push(term);
        }
    };
    for (index, raw) in terms.iter().enumerate() {
        let parsed = Term::parse(index, raw)?;
        if parsed.is_empty() {
            continue;
        }
        // Such a term only matches nodes of that class already: ANDing the classes into it
        // changes nothing, and keeping it verbatim is what makes pinning idempotent.
        if alternatives
            .iter()
            .any(|alternative| alternative.is_in(raw))
        {
            push(raw.clone());
            continue;
        }
        for alternative in alternatives {
            if !alternative.contradicts(&parsed) {
                push(alternative.merged_into(raw));
            }
        }
    }
    Ok(restricted)
}

/// One way of being in a target class: requirements that hold exactly on its nodes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Alternative {
    /// Each key has the value, or is absent where `None`; sorted by key.
    Labels(Vec<(String, Option<String>)>),
    /// The node has this name.
    NodeName(String),
}

impl Alternative {
    fn is_everything(&self) -> bool {
        matches!(self, Self::Labels(labels) if labels.is_empty())
    }

    fn expressions(&self) -> Vec<NodeSelectorRequirement> {
        match self {
            Self::Labels(labels) => labels
                .iter()
                .map(|(key, value)| match value {
                    Some(value) => requirement(key, "In", Some(value)),
                    None => requirement(key, "DoesNotExist", None),
                })
                .collect(),
            Self::NodeName(_) => Vec::new(),
        }
    }

    fn fields(&self) -> Vec<NodeSelectorRequirement> {
        match self {
            Self::Labels(_) => Vec::new(),
            Self::NodeName(name) => vec![requirement(NODE_NAME_FIELD, "In", Some(name))],
        }
    }

    /// Whether `term` already carries every requirement of this alternative.
    fn is_in(&self, term: &NodeSelectorTerm) -> bool {
        let carries = |present: &Option<Vec<NodeSelectorRequirement>>,
                       wanted: Vec<NodeSelectorRequirement>| {
            wanted.iter().all(|wanted| {
                present
                    .iter()
                    .flatten()
                    .any(|present| same_requirement(present, wanted))
            })
        };
        carries(&term.match_expressions, self.expressions())
            && carries(&term.match_fields, self.fields())
    }

    /// Whether no node of this alternative can satisfy `term`, judged on the keys and the name
    /// the alternative fixes.
    fn contradicts(&self, term: &Term) -> bool {
        match self {
            Self::Labels(labels) => term.label_requirements().iter().any(|requirement| {
                labels
                    .iter()
                    .find(|(key, _)| key == requirement.key())
                    .is_some_and(|(_, value)| !requirement.matches(value.as_deref()))
            }),
            Self::NodeName(name) => term
                .name_requirements()
                .iter()
                .any(|requirement| !requirement.matches(name)),
        }
    }

    /// `term` with this alternative's requirements appended, those it already has skipped.
    fn merged_into(&self, term: &NodeSelectorTerm) -> NodeSelectorTerm {
        and_into(term, self.expressions(), self.fields())
    }
}

/// `term` with the `expressions` and `fields` it lacks appended: the term ANDed with them.
fn and_into(
    term: &NodeSelectorTerm,
    expressions: Vec<NodeSelectorRequirement>,
    fields: Vec<NodeSelectorRequirement>,
) -> NodeSelectorTerm {
    let merge = |present: &Option<Vec<NodeSelectorRequirement>>,
                 wanted: Vec<NodeSelectorRequirement>| {
        let mut merged = present.clone().unwrap_or_default();
        for wanted in wanted {
            if !merged
                .iter()
                .any(|present| same_requirement(present, &wanted))
            {
                merged.push(wanted);
            }
        }
        // An absent list stays absent, so an unchanged term compares equal to its input.
        (!merged.is_empty() || present.is_some()).then_some(merged)
    };
    NodeSelectorTerm {
        match_expressions: merge(&term.match_expressions, expressions),
        match_fields: merge(&term.match_fields, fields),
    }
}

fn requirement(key: &str, operator: &str, value: Option<&str>) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values: value.map(|value| vec![value.to_owned()]),
    }
}

/// Equal as requirements: same key and operator, same set of values (order and repeats aside).
fn same_requirement(a: &NodeSelectorRequirement, b: &NodeSelectorRequirement) -> bool {
    let values = |r: &NodeSelectorRequirement| -> BTreeSet<String> {
        r.values.iter().flatten().cloned().collect()
    };
    a.key == b.key && a.operator == b.operator && values(a) == values(b)
}

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
