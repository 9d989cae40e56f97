//! Node selector terms parsed from their Kubernetes form: validated once, then matched against
//! nodes and written for humans. Owns the meaning of each operator; knows nothing of pods or
//! classes. Mutating admission runs before the apiserver's validation, so what that validation
//! rejects (unknown operators, wrong value counts, matchFields keys other than `metadata.name`,
//! an empty list of terms) is an error here too, and so is a non-integer `Gt`/`Lt` value, which
//! kube-scheduler would let match nothing. Label key and value syntax is left to the apiserver.

use std::fmt;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

use super::NodeView;
use super::{RequirementList, RequirementProblem, SelectionError};

/// The one node field matchFields can read.
pub(super) const NODE_NAME_FIELD: &str = "metadata.name";

const LABEL_OPERATORS: &str = "In, NotIn, Exists, DoesNotExist, Gt, Lt";
const FIELD_OPERATORS: &str = "In, NotIn";

/// One node selector term: all its requirements must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Term {
    labels: Vec<LabelRequirement>,
    names: Vec<NameRequirement>,
}

/// A matchExpressions requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LabelRequirement {
    key: String,
    test: LabelTest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelTest {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// A matchFields requirement on `metadata.name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NameRequirement {
    Is(String),
    IsNot(String),
}

impl Term {
    /// Parses the term at `index` of `nodeSelectorTerms`.
    pub(super) fn parse(index: usize, term: &NodeSelectorTerm) -> Result<Self, SelectionError> {
        let invalid = |list, position, raw: &NodeSelectorRequirement, problem| {
            SelectionError::InvalidRequirement {
                term: index,
                list,
                index: position,
                requirement: written(raw),
                problem,
            }
        };
        let labels = term
            .match_expressions
            .iter()
            .flatten()
            .enumerate()
            .map(|(position, raw)| {
                LabelRequirement::parse(raw).map_err(|problem| {
                    invalid(RequirementList::MatchExpressions, position, raw, problem)
                })
            })
            .collect::<Result<_, _>>()?;
        let names = term
            .match_fields
            .iter()
            .flatten()
            .enumerate()
            .map(|(position, raw)| {
                NameRequirement::parse(raw).map_err(|problem| {
                    invalid(RequirementList::MatchFields, position, raw, problem)
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { labels, names })
    }

    /// Whether `node` satisfies every requirement; an empty term matches no node.
    pub(super) fn matches<N: NodeView + ?Sized>(&self, node: &N) -> bool {
        !self.is_empty()
            && self.labels.iter().all(|r| r.matches(node.label(&r.key)))
            && self.names.iter().all(|r| r.matches(node.name()))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.names.is_empty()
    }

    pub(super) fn label_requirements(&self) -> &[LabelRequirement] {
        &self.labels
    }

    pub(super) fn name_requirements(&self) -> &[NameRequirement] {
        &self.names
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("empty term, matches no node");
        }
        let labels = self.labels.iter().map(|r| r as &dyn fmt::Display);
        let names = self.names.iter().map(|r| r as &dyn fmt::Display);
        for (index, requirement) in labels.chain(names).enumerate() {
            if index > 0 {
                f.write_str(" and ")?;
            }
            requirement.fmt(f)?;
        }
        Ok(())
    }
}

impl LabelRequirement {
    fn parse(raw: &NodeSelectorRequirement) -> Result<Self, RequirementProblem> {
        let operator = Operator::parse(&raw.operator).ok_or_else(|| {
            RequirementProblem::UnsupportedOperator {
                operator: raw.operator.clone(),
                allowed: LABEL_OPERATORS,
            }
        })?;
        let values = raw.values.as_deref().unwrap_or_default();
        let count = values.len();
        let test = match operator {
            Operator::In | Operator::NotIn if count == 0 => {
                return Err(RequirementProblem::NoValues {
                    operator: operator.as_str(),
                });
            }
            Operator::In => LabelTest::In(values.to_vec()),
            Operator::NotIn => LabelTest::NotIn(values.to_vec()),
            Operator::Exists | Operator::DoesNotExist if count != 0 => {
                return Err(RequirementProblem::UnexpectedValues {
                    operator: operator.as_str(),
                    count,
                });
            }
            Operator::Exists => LabelTest::Exists,
            Operator::DoesNotExist => LabelTest::DoesNotExist,
            Operator::Gt | Operator::Lt => {
                let [value] = values else {
                    return Err(RequirementProblem::NotOneValue {
                        operator: operator.as_str(),
                        count,
                    });
                };
                let bound =
                    parse_integer(value).ok_or_else(|| RequirementProblem::NotAnInteger {
                        value: value.clone(),
                    })?;
                if matches!(operator, Operator::Gt) {
                    LabelTest::Gt(bound)
                } else {
                    LabelTest::Lt(bound)
                }
            }
        };
        Ok(Self {
            key: raw.key.clone(),
            test,
        })
    }

    pub(super) fn key(&self) -> &str {
        &self.key
    }

    /// Whether a node whose label `key` has `value` (or is absent) satisfies the requirement.
    pub(super) fn matches(&self, value: Option<&str>) -> bool {
        match (&self.test, value) {
            (LabelTest::In(values), Some(value)) => values.iter().any(|v| v == value),
            (LabelTest::In(_), None) => false,
            (LabelTest::NotIn(values), Some(value)) => values.iter().all(|v| v != value),
            (LabelTest::NotIn(_), None) => true,
            (LabelTest::Exists, value) => value.is_some(),
            (LabelTest::DoesNotExist, value) => value.is_none(),
            // A label that is absent or not an integer satisfies neither bound, as in the scheduler.
            (LabelTest::Gt(bound), value) => {
                value.and_then(parse_integer).is_some_and(|v| v > *bound)
            }
            (LabelTest::Lt(bound), value) => {
                value.and_then(parse_integer).is_some_and(|v| v < *bound)
            }
        }
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        match &self.test {
            LabelTest::In(values) => write!(f, "{key} In [{}]", values.join(", ")),
            LabelTest::NotIn(values) => write!(f, "{key} NotIn [{}]", values.join(", ")),
            LabelTest::Exists => write!(f, "{key} Exists"),
            LabelTest::DoesNotExist => write!(f, "{key} DoesNotExist"),
            LabelTest::Gt(bound) => write!(f, "{key} Gt {bound}"),
            LabelTest::Lt(bound) => write!(f, "{key} Lt {bound}"),
        }
    }
}

impl NameRequirement {
    fn parse(raw: &NodeSelectorRequirement) -> Result<Self, RequirementProblem> {
        if raw.key != NODE_NAME_FIELD {
            return Err(RequirementProblem::UnsupportedField {
                key: raw.key.clone(),
            });
        }
        let operator = Operator::parse(&raw.operator)
            .filter(|operator| matches!(operator, Operator::In | Operator::NotIn))
            .ok_or_else(|| RequirementProblem::UnsupportedOperator {
                operator: raw.operator.clone(),
                allowed: FIELD_OPERATORS,
            })?;
        let values = raw.values.as_deref().unwrap_or_default();
        // Field selectors compare one value; the apiserver and the scheduler both insist on it.
        let [name] = values else {
            return Err(RequirementProblem::NotOneValue {
                operator: operator.as_str(),
                count: values.len(),
            });
        };
        Ok(if matches!(operator, Operator::In) {
            Self::Is(name.clone())
        } else {
            Self::IsNot(name.clone())
        })
    }

    /// Whether a node named `name` satisfies the requirement.
    // The scheduler skips matchFields for a node with no name; the apiserver never stores one, so
    // a name is always compared here.
    pub(super) fn matches(&self, name: &str) -> bool {
        match self {
            Self::Is(wanted) => wanted == name,
            Self::IsNot(unwanted) => unwanted != name,
        }
    }
}

impl fmt::Display for NameRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Is(name) => write!(f, "{NODE_NAME_FIELD} In [{name}]"),
            Self::IsNot(name) => write!(f, "{NODE_NAME_FIELD} NotIn [{name}]"),
        }
    }
}

/// Integers as Go's `strconv.ParseInt(s, 10, 64)` reads them: optional sign, decimal digits.
fn parse_integer(text: &str) -> Option<i64> {
    text.parse().ok()
}

/// A node selector operator, as Kubernetes spells it.
#[derive(Debug, Clone, Copy)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl Operator {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Lt" => Self::Lt,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
        }
    }
}

/// A requirement as the user wrote it, for error messages: `zone In [a, b]`, `gpu Exists`.
fn written(raw: &NodeSelectorRequirement) -> String {
    let values = raw.values.as_deref().unwrap_or_default();
    let bare = values.is_empty() && matches!(raw.operator.as_str(), "Exists" | "DoesNotExist");
    if bare {
        format!("{} {}", raw.key, raw.operator)
    } else {
        format!("{} {} [{}]", raw.key, raw.operator, values.join(", "))
    }
}
