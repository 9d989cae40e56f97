//! Saying in words why an expression did not hold, for explanations. Knows nothing of sets,
//! rules or nodes.

use super::{Check, Expr, Input, Op};
use crate::engine::Format;
use crate::engine::error::shown;

impl Expr {
    /// Why the expression did not hold on `subject` (`label "k"`, `element "e" of feature "f"`).
    pub(crate) fn why(&self, subject: &str, input: Input<'_>, check: Check) -> String {
        let value = match input {
            Input::Missing if self.op == Op::NotIn => {
                return format!("{subject} is absent, and NFD's NotIn needs it present");
            }
            Input::Missing => return format!("{subject} is absent"),
            Input::Flag if self.op == Op::DoesNotExist => return format!("{subject} exists"),
            Input::Flag => {
                return format!(
                    "{subject} is a flag with no value, so op {} cannot hold",
                    self.spelled
                );
            }
            Input::Value(v) => v,
        };
        let values = list(&self.values);
        let first = self.values.first().map(String::as_str).unwrap_or("");
        let second = self.values.get(1).map(String::as_str).unwrap_or("");
        let tail = match check {
            Check::NotInteger if self.format == Format::Nfd => {
                "not an integer (an evaluation error in NFD)".to_owned()
            }
            Check::NotInteger => "not an integer".to_owned(),
            Check::NotVersion => "not a version (an evaluation error in NFD)".to_owned(),
            Check::Pass | Check::Fail => match self.op {
                Op::DoesNotExist => return format!("{subject} exists (value {value:?})"),
                Op::In => format!("not in {values}"),
                Op::NotIn => format!("which is in {values}"),
                Op::InRegexp => format!("matching none of {values}"),
                Op::Gt => format!("not greater than {first}"),
                Op::Ge => format!("not at least {first}"),
                Op::Lt => format!("not less than {first}"),
                Op::Le => format!("not at most {first}"),
                Op::GtLt => format!("not strictly between {first} and {second}"),
                Op::GeLe => format!("not between {first} and {second} (inclusive)"),
                Op::IsTrue => "not \"true\"".to_owned(),
                Op::IsFalse => "not \"false\"".to_owned(),
                Op::Any | Op::Exists => "unexpected".to_owned(),
            },
        };
        format!("{subject} is {value:?}, {tail}")
    }

    /// The expression in words on a named element: `vendor In [0eee]`.
    pub(crate) fn display_on(&self, name: &str) -> String {
        let op = shown(&self.spelled);
        if self.values.is_empty() {
            format!("{name} {op}")
        } else {
            format!("{name} {op} {}", list(&self.values))
        }
    }

    /// Why no element name of `feature` satisfied this `matchName` expression.
    pub(crate) fn why_no_name(&self, feature: &str) -> String {
        match self.op {
            Op::InRegexp => format!(
                "feature {feature:?} has no element matching {}",
                self.values.join(" or ")
            ),
            Op::In => format!(
                "feature {feature:?} has no element named {}",
                self.values.join(" or ")
            ),
            _ => format!(
                "feature {feature:?} has no element whose name satisfies {}",
                self.display_on("op").trim_start_matches("op ")
            ),
        }
    }
}

/// `[a, b]`, as the explanations print value lists.
fn list(values: &[String]) -> String {
    format!("[{}]", values.join(", "))
}
