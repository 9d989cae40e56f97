//! Node selection: which nodes a pod's `nodeSelector` and required node affinity allow, with
//! kube-scheduler's semantics (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`), read
//! through [`NodeView`] whatever shape a node comes in; pinning a pod to node classes; narrowing a
//! gated pod to label values (platform placement); a short description for denials. Where the
//! scheduler would treat a malformed requirement as "matches nothing", this is an error, so the
//! webhook denies with a message; so is a selection over its size limits (they keep one pod's
//! worst case, over thousands of nodes, to a few million comparisons). Pure: never groups nodes,
//! chooses images or talks to the apiserver.

mod pin;
mod requirement;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Node, NodeSelectorTerm, PodSpec};
use kube_core::{ObjectMeta, PartialObjectMeta};

pub use pin::{ClassSelector, Narrowed, narrow, pin};
use requirement::Term;

/// The terms of the pod's required node affinity (none when it has none).
pub fn required_terms(spec: &PodSpec) -> &[NodeSelectorTerm] {
    pin::required_selector(spec.affinity.as_ref())
        .map(|required| required.node_selector_terms.as_slice())
        .unwrap_or_default()
}

/// Which nodes a pod may run on: its `nodeSelector` ANDed with its required node affinity,
/// validated once so matching cannot fail. `Display` is the short description in denials, e.g.
/// `nodeSelector {disktype=ssd} and affinity (zone In [a, b]) or (gpu Exists)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    node_selector: BTreeMap<String, String>,
    /// `None` when the pod has no required node affinity; `Some` of an empty list matches no node.
    required: Option<Vec<Term>>,
}

impl Placement {
    /// Reads and validates the pod's `nodeSelector` and
    /// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub fn from_pod_spec(spec: &PodSpec) -> Result<Self, SelectionError> {
        check_limits(spec)?;
        let required = pin::required_selector(spec.affinity.as_ref())
            .map(|selector| {
                selector
                    .node_selector_terms
                    .iter()
                    .enumerate()
                    .map(|(index, term)| Term::parse(index, term))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        Ok(Self {
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            required,
        })
    }

    /// Whether the pod may run on `node`.
    pub fn matches<N: NodeView + ?Sized>(&self, node: &N) -> bool {
        let selector_holds = self
            .node_selector
            .iter()
            .all(|(key, value)| node.label(key) == Some(value.as_str()));
        selector_holds
            && self
                .required
                .as_ref()
                .is_none_or(|terms| terms.iter().any(|term| term.matches(node)))
    }

    /// Every node of `nodes` the pod may run on, in the order given.
    pub fn candidates<'n, N: NodeView + 'n>(
        &self,
        nodes: impl IntoIterator<Item = &'n N>,
    ) -> Vec<&'n N> {
        nodes
            .into_iter()
            .filter(|node| self.matches(*node))
            .collect()
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.node_selector.is_empty() && self.required.is_none() {
            return f.write_str("any node");
        }
        if !self.node_selector.is_empty() {
            f.write_str("nodeSelector {")?;
            for (index, (key, value)) in self.node_selector.iter().enumerate() {
                if index > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{key}={value}")?;
            }
            f.write_str("}")?;
            if self.required.is_some() {
                f.write_str(" and ")?;
            }
        }
        match self.required.as_deref() {
            None => Ok(()),
            Some([]) => f.write_str("affinity with no terms (matches no node)"),
            Some(terms) => {
                f.write_str("affinity ")?;
                for (index, term) in terms.iter().enumerate() {
                    if index > 0 {
                        f.write_str(" or ")?;
                    }
                    write!(f, "({term})")?;
                }
                Ok(())
            }
        }
    }
}

/// What node selection reads of a node: its name and labels; for `ObjectMeta`, `Node` and
/// `PartialObjectMeta<Node>`, so the controller (node metadata) and the CLI (whole nodes) share it.
pub trait NodeView {
    /// The node's name (`metadata.name`), the only field matchFields can read.
    fn name(&self) -> &str;
    /// The value of the node's label `key`, if it carries that label.
    fn label(&self, key: &str) -> Option<&str>;
}

impl NodeView for ObjectMeta {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }
}

impl NodeView for Node {
    fn name(&self) -> &str {
        self.metadata.name()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.label(key)
    }
}

impl NodeView for PartialObjectMeta<Node> {
    fn name(&self) -> &str {
        self.metadata.name()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.label(key)
    }
}

/// Why a pod's node selection cannot be evaluated or pinned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// A requirement of the pod's required node affinity is malformed.
    // The problem is part of the message (the webhook's denial is this one line), so it is not
    // also chained as a source, which would print it twice.
    #[error(
        "invalid required node affinity: nodeSelectorTerms[{term}].{list}[{index}] ({requirement}): {problem}"
    )]
    InvalidRequirement {
        /// Index of the term in `nodeSelectorTerms`.
        term: usize,
        /// Which list of the term holds the requirement.
        list: RequirementList,
        /// Index of the requirement in that list.
        index: usize,
        /// The requirement as written, e.g. `zone In []`.
        requirement: String,
        /// What is wrong with it.
        problem: RequirementProblem,
    },
    /// The selection is larger than planning may take on (see `super::limits`).
    #[error(
        "the pod's node selection is too large to plan: {count} {what}, over ocifit's limit of {limit}"
    )]
    TooLarge {
        /// What was counted, e.g. `values in its required node affinity`.
        what: &'static str,
        /// How many there are.
        count: usize,
        limit: usize,
    },
    /// Pinning was asked with no target class.
    #[error("no node class to pin the pod to")]
    NoTargetClass,
    /// The pod's required node affinity, restricted to the target classes, matches no node.
    #[error("the pod's required node affinity matches no node of the target classes")]
    PinMatchesNoNode,
}

/// The two lists of requirements a node selector term has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequirementList {
    /// `matchExpressions`: requirements on node labels.
    MatchExpressions,
    /// `matchFields`: requirements on node fields (only `metadata.name`).
    MatchFields,
}

impl fmt::Display for RequirementList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MatchExpressions => "matchExpressions",
            Self::MatchFields => "matchFields",
        })
    }
}

/// What is wrong with one node selector requirement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementProblem {
    /// The operator is not one the list accepts.
    #[error("operator {operator:?} is not one of {allowed}")]
    UnsupportedOperator {
        /// The operator as written.
        operator: String,
        /// The operators the list accepts.
        allowed: &'static str,
    },
    /// `In` or `NotIn` with no value.
    #[error("operator {operator} needs at least one value")]
    NoValues { operator: &'static str },
    /// `Exists` or `DoesNotExist` with values.
    #[error("operator {operator} takes no values, got {count}")]
    UnexpectedValues {
        operator: &'static str,
        /// How many values were given.
        count: usize,
    },
    /// `Gt`, `Lt`, or a matchFields `In`/`NotIn`, without exactly one value.
    #[error("operator {operator} needs exactly one value, got {count}")]
    NotOneValue {
        operator: &'static str,
        /// How many values were given.
        count: usize,
    },
    /// The value of `Gt` or `Lt` is not a 64-bit integer.
    #[error("value {value:?} is not an integer")]
    NotAnInteger {
        /// The value as written.
        value: String,
    },
    /// A matchFields key other than `metadata.name`.
    #[error("field {key:?} is not supported, matchFields can only read metadata.name")]
    UnsupportedField {
        /// The key as written.
        key: String,
    },
}

/// Terms of the required node affinity.
const MAX_TERMS: usize = 64;
/// Requirements: nodeSelector entries, matchExpressions and matchFields, over all terms.
const MAX_REQUIREMENTS: usize = 512;
/// Values of all requirements together.
const MAX_VALUES: usize = 2048;

/// Checks the pod's nodeSelector and required node affinity against the limits.
fn check_limits(spec: &PodSpec) -> Result<(), SelectionError> {
    let terms = required_terms(spec);
    over(
        terms.len(),
        MAX_TERMS,
        "terms in its required node affinity",
    )?;
    let requirements = terms.iter().flat_map(|term| {
        term.match_expressions
            .iter()
            .flatten()
            .chain(term.match_fields.iter().flatten())
    });
    let (count, values) = requirements.fold((0usize, 0usize), |(count, values), r| {
        (count + 1, values + r.values.as_ref().map_or(0, Vec::len))
    });
    let selector = spec.node_selector.as_ref().map_or(0, |s| s.len());
    over(
        count + selector,
        MAX_REQUIREMENTS,
        "requirements (nodeSelector entries and affinity expressions)",
    )?;
    over(values, MAX_VALUES, "values in its required node affinity")
}

fn over(count: usize, limit: usize, what: &'static str) -> Result<(), SelectionError> {
    if count > limit {
        return Err(SelectionError::TooLarge { what, count, limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
