//! Why an artifact is invalid, and where in it: the set (index and tag), the rule (index and NFD
//! name), the term (index and NFD feature) and the expression (label key or NFD element, and op).
//! [`Location`] also names the failing expression in an explanation. Owns no parsing.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Format;

/// An artifact that cannot be used: not a document of its format, or breaking the format's rules.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The bytes are not a JSON document (ocifit artifacts are JSON).
    #[error("failed to parse the ocifit artifact as JSON")]
    Json {
        /// The JSON parser's error (with line and column).
        #[source]
        source: serde_json::Error,
    },
    /// The bytes are not a YAML (or JSON) document.
    #[error("failed to parse the {format} artifact as YAML")]
    Yaml {
        /// The format being read (NFD, or any format during detection).
        format: Format,
        /// The YAML parser's error (with line and column).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The document does not have its format's shape: a missing, unknown or mistyped field.
    #[error("{format} artifact, {at}: {message}{}", hint_text(*.hint))]
    Shape {
        /// The format the document was read as.
        format: Format,
        /// Where: `set N ("tag")` and the path of the offending field inside it.
        at: String,
        /// What is wrong (the deserializer's words, naming the field).
        message: String,
        /// When the document looks like the other format, says so.
        hint: Option<&'static str>,
    },
    /// An expression or field breaks the format's rules (operator, values, pattern, number).
    #[error("{at}: {problem}")]
    Invalid {
        /// Where the offending expression is.
        at: Box<Location>,
        /// What is wrong with it.
        problem: Problem,
    },
    /// The artifact is larger than the engine reads ([`LIMITS`](super::LIMITS)): where, what,
    /// and the limit.
    #[error("{at}: {found} {what}, over the limit of {limit}")]
    TooLarge {
        /// Where the limit was exceeded (a set, rule, term or expression, or a document path).
        at: String,
        /// What was counted (`expressions in the term`, `bytes in a string`, ...).
        what: &'static str,
        /// How many were found (for totals over the artifact: counted up to this point).
        found: usize,
        limit: usize,
    },
    /// [`Format::detect`] found no `compatibilities` list, so the document is neither format.
    #[error("failed to detect the artifact's format: {reason}")]
    Undetectable { reason: &'static str },
}

/// An operator as messages print it: the empty op shows as `""`.
pub(crate) fn shown(op: &str) -> &str {
    if op.is_empty() { "\"\"" } else { op }
}

fn hint_text(hint: Option<&'static str>) -> String {
    hint.map(|h| format!(" ({h})")).unwrap_or_default()
}

/// What is wrong with an expression or a set, found when the artifact is parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The operator is not one this format knows (ocifit would silently not match; we refuse).
    #[error("unknown operator {op:?} (the {format} format knows {known})")]
    UnknownOp {
        /// The operator as written.
        op: String,
        /// The format it was read as.
        format: Format,
        /// The operators that format knows.
        known: &'static str,
    },
    /// The operator needs a different number of values.
    #[error("op {} needs {expected}, got {got}", shown(op))]
    ValueCount {
        /// The operator as written.
        op: String,
        /// How many it needs, in words ("exactly 1 value", "no value", ...).
        expected: &'static str,
        /// How many were given.
        got: usize,
    },
    /// A pattern for `InRegexp` does not compile.
    #[error("invalid regular expression {pattern:?}: {reason}")]
    InvalidRegex {
        /// The pattern as written.
        pattern: String,
        /// The regex compiler's reason, on one line.
        reason: String,
    },
    /// An integer comparison's value is not an integer.
    #[error("value {value:?} is not an integer")]
    NotInteger {
        /// The value as written.
        value: String,
    },
    /// A `type: version` comparison's value is not a version (`%d`, `%d.%d` or `%d.%d.%d`).
    #[error("value {value:?} is not a version (%d, %d.%d or %d.%d.%d, optional suffix)")]
    NotVersion {
        /// The value as written.
        value: String,
    },
    /// An integer range (`GtLt`, `GeLe`) whose first value is not below the second.
    #[error("range values must be increasing, got {low:?} then {high:?}")]
    EmptyRange {
        /// The first value.
        low: String,
        /// The second value.
        high: String,
    },
    /// An NFD expression `type` other than `version`.
    #[error("unknown type {value:?} (only \"version\" is defined)")]
    UnknownType {
        /// The type as written.
        value: String,
    },
    /// A required name is empty (an ocifit `tag` or `key`, an NFD `feature`).
    #[error("{field} must not be empty")]
    Empty {
        /// The field's name.
        field: &'static str,
    },
}

/// Where in an artifact: a set, and as deep as known, its rule, term and expression.
///
/// Serialized in explanations (camelCase; absent parts omitted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// Index of the compatibility set (0-based, document order).
    pub set: usize,
    /// The set's tag (an image reference, or an NFD grouping name).
    pub tag: String,
    /// Index of the rule in the set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<usize>,
    /// The NFD rule's `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    /// Index of the NFD `matchAny` element the term is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_any: Option<usize>,
    /// Index of the term (an entry of `matchFeatures`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<usize>,
    /// The NFD feature the term reads (`cpu.cpuid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
    /// Index of the ocifit expression in its `matchExpressions` list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<usize>,
    /// The ocifit label key, or the NFD element name (a `matchExpressions` map key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// True for an NFD `matchName` expression.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub match_name: bool,
    /// The operator as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
}

impl Location {
    pub(crate) fn set(set: usize, tag: &str) -> Location {
        Location {
            set,
            tag: tag.to_owned(),
            ..Location::default()
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "set {} ({:?})", self.set, self.tag)?;
        if let Some(rule) = self.rule {
            write!(f, ", rule {rule}")?;
            if let Some(name) = &self.rule_name {
                write!(f, " ({name:?})")?;
            }
        }
        if let Some(any) = self.match_any {
            write!(f, ", matchAny {any}")?;
        }
        if let Some(term) = self.term {
            write!(f, ", term {term}")?;
            if let Some(feature) = &self.feature {
                write!(f, " (feature {feature:?})")?;
            }
        }
        let op = shown(self.op.as_deref().unwrap_or(""));
        if let Some(index) = self.expression {
            let key = self.key.as_deref().unwrap_or("");
            write!(f, ", expression {index} (key {key:?}, op {op})")?;
        } else if let Some(element) = &self.key {
            write!(f, ", element {element:?} (op {op})")?;
        } else if self.match_name {
            write!(f, ", matchName (op {op})")?;
        }
        Ok(())
    }
}
