//! Why a pod's node selection cannot be evaluated or pinned, requirement by requirement.

use std::fmt;

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
