//! Operators: validating one expression for its format at parse time (values counted, patterns
//! compiled once, numbers and versions parsed once) and testing it against one input, and saying
//! in words why it did not hold (for explanations). Knows nothing of sets, rules or nodes.

use regex::{Regex, RegexBuilder};

use super::Format;
use super::error::{Problem, shown};
use super::limits::LIMITS;

/// The operators of both formats (each format accepts its own subset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// NFD's empty op: always holds.
    Any,
    In,
    NotIn,
    InRegexp,
    Exists,
    DoesNotExist,
    Gt,
    Ge,
    Lt,
    Le,
    GtLt,
    GeLe,
    IsTrue,
    IsFalse,
}

const OCIFIT_OPS: &str = "In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge (Gte), Lt, Le (Lte)";
const NFD_OPS: &str = "\"\" (always), In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge (Gte), \
                       Lt, Le (Lte), GtLt, GeLe, IsTrue, IsFalse";

fn parse_op(format: Format, op: &str) -> Option<Op> {
    let common = match op {
        "In" => Some(Op::In),
        "NotIn" => Some(Op::NotIn),
        "InRegexp" => Some(Op::InRegexp),
        "Exists" => Some(Op::Exists),
        "DoesNotExist" => Some(Op::DoesNotExist),
        "Gt" => Some(Op::Gt),
        "Ge" | "Gte" => Some(Op::Ge),
        "Lt" => Some(Op::Lt),
        "Le" | "Lte" => Some(Op::Le),
        _ => None,
    };
    match format {
        Format::Ocifit => common,
        Format::Nfd => common.or(match op {
            "" => Some(Op::Any),
            "GtLt" => Some(Op::GtLt),
            "GeLe" => Some(Op::GeLe),
            "IsTrue" => Some(Op::IsTrue),
            "IsFalse" => Some(Op::IsFalse),
            _ => None,
        }),
    }
}

/// A numeric comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Gt,
    Ge,
    Lt,
    Le,
    GtLt,
    GeLe,
}

impl Cmp {
    fn holds<T: Ord>(self, v: &T, low: &T, high: &T) -> bool {
        match self {
            Cmp::Gt => v > low,
            Cmp::Ge => v >= low,
            Cmp::Lt => v < low,
            Cmp::Le => v <= low,
            Cmp::GtLt => v > low && v < high,
            Cmp::GeLe => v >= low && v <= high,
        }
    }
}

/// A version `major.minor.patch` (missing parts are 0; any suffix is ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Version(u64, u64, u64);

/// Reads `%d`, `%d.%d` or `%d.%d.%d` with an optional leading `v` and an optional suffix that
/// starts with `-` or `+` (`6.8.0-45-generic`, `4.18.0-513.el8.x86_64`), as NFD's `type: version`
/// does (it drops the pre-release part). Looser than NFD's semver reader on suffix characters.
pub(crate) fn parse_version(s: &str) -> Option<Version> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let core = match s.find(['-', '+']) {
        Some(end) if end + 1 < s.len() => &s[..end],
        Some(_) => return None,
        None => s,
    };
    let mut parts = [0u64; 3];
    let mut numbers = core.split('.');
    for slot in &mut parts {
        match numbers.next() {
            Some(part) if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) => {
                *slot = part.parse().ok()?;
            }
            Some(_) => return None,
            None => break,
        }
    }
    if numbers.next().is_some() {
        return None;
    }
    Some(Version(parts[0], parts[1], parts[2]))
}

fn parse_int(s: &str) -> Option<i64> {
    s.parse().ok()
}

#[derive(Clone, Debug)]
enum Bounds {
    Int(i64, i64),
    Version(Version, Version),
}

#[derive(Clone, Debug)]
enum Test {
    Always,
    Exists,
    DoesNotExist,
    In,
    NotIn,
    Regex(Vec<Regex>),
    Compare(Cmp, Bounds),
    IsTrue,
    IsFalse,
}

/// What an expression is tested against: an absent key or element, a flag element (present,
/// no value) or a value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Input<'a> {
    Missing,
    Flag,
    Value(&'a str),
}

/// The result of one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    Pass,
    Fail,
    /// An integer comparison met a non-integer input (ocifit: no match; NFD: an error).
    NotInteger,
    /// A version comparison met an input that is not a version (NFD: an error).
    NotVersion,
}

/// One compiled expression.
#[derive(Clone, Debug)]
pub(crate) struct Expr {
    op: Op,
    format: Format,
    /// The operator as written (`Gte` stays `Gte` in messages).
    pub(crate) spelled: String,
    /// The values as written.
    pub(crate) values: Vec<String>,
    test: Test,
}

impl Expr {
    /// Validates and compiles an expression with its format's rules. `ty` is NFD's `type`.
    pub(crate) fn compile(
        format: Format,
        spelled: &str,
        values: Vec<String>,
        ty: Option<&str>,
    ) -> Result<Expr, Problem> {
        let op = parse_op(format, spelled).ok_or_else(|| Problem::UnknownOp {
            op: spelled.to_owned(),
            format,
            known: match format {
                Format::Ocifit => OCIFIT_OPS,
                Format::Nfd => NFD_OPS,
            },
        })?;
        let version = match ty {
            None | Some("") => false,
            Some("version") => true,
            Some(other) => {
                return Err(Problem::UnknownType {
                    value: other.to_owned(),
                });
            }
        };
        check_count(format, op, spelled, values.len())?;
        let test = match op {
            Op::Any => Test::Always,
            Op::Exists => Test::Exists,
            Op::DoesNotExist => Test::DoesNotExist,
            Op::In => Test::In,
            Op::NotIn => Test::NotIn,
            Op::IsTrue => Test::IsTrue,
            Op::IsFalse => Test::IsFalse,
            Op::InRegexp => Test::Regex(
                values
                    .iter()
                    .map(|p| compile_regex(p))
                    .collect::<Result<_, _>>()?,
            ),
            Op::Gt | Op::Ge | Op::Lt | Op::Le | Op::GtLt | Op::GeLe => {
                let cmp = match op {
                    Op::Gt => Cmp::Gt,
                    Op::Ge => Cmp::Ge,
                    Op::Lt => Cmp::Lt,
                    Op::Le => Cmp::Le,
                    Op::GtLt => Cmp::GtLt,
                    _ => Cmp::GeLe,
                };
                Test::Compare(cmp, bounds(&values, version)?)
            }
        };
        Ok(Expr {
            op,
            format,
            spelled: spelled.to_owned(),
            values,
            test,
        })
    }

    pub(crate) fn op(&self) -> Op {
        self.op
    }

    /// Tests the expression against one input.
    pub(crate) fn check(&self, input: Input<'_>) -> Check {
        let value = match (&self.test, input) {
            (Test::Always, _) => return Check::Pass,
            (Test::Exists, Input::Missing) => return Check::Fail,
            (Test::Exists, _) => return Check::Pass,
            (Test::DoesNotExist, Input::Missing) => return Check::Pass,
            (Test::DoesNotExist, _) => return Check::Fail,
            // The one place the formats disagree on absence: ocifit's NotIn holds on a missing
            // key, NFD's does not.
            (Test::NotIn, Input::Missing) if self.format == Format::Ocifit => return Check::Pass,
            // Every other op needs a value; NFD flag elements have none.
            (_, Input::Missing | Input::Flag) => return Check::Fail,
            (_, Input::Value(v)) => v,
        };
        let pass = match &self.test {
            Test::In => self.values.iter().any(|v| v == value),
            Test::NotIn => !self.values.iter().any(|v| v == value),
            Test::Regex(patterns) => patterns.iter().any(|re| re.is_match(value)),
            Test::IsTrue => value == "true",
            Test::IsFalse => value == "false",
            Test::Compare(cmp, Bounds::Int(low, high)) => match parse_int(value) {
                Some(v) => cmp.holds(&v, low, high),
                None => return Check::NotInteger,
            },
            Test::Compare(cmp, Bounds::Version(low, high)) => match parse_version(value) {
                Some(v) => cmp.holds(&v, low, high),
                None => return Check::NotVersion,
            },
            Test::Always | Test::Exists | Test::DoesNotExist => true,
        };
        if pass { Check::Pass } else { Check::Fail }
    }
}

fn check_count(format: Format, op: Op, spelled: &str, got: usize) -> Result<(), Problem> {
    let (ok, expected) = match (format, op) {
        // ocifit ignores values on presence tests; NFD refuses them.
        (Format::Ocifit, Op::Exists | Op::DoesNotExist) => (true, ""),
        (_, Op::Any | Op::Exists | Op::DoesNotExist | Op::IsTrue | Op::IsFalse) => {
            (got == 0, "no value")
        }
        (_, Op::In | Op::NotIn | Op::InRegexp) => (got >= 1, "at least 1 value"),
        (_, Op::Gt | Op::Ge | Op::Lt | Op::Le) => (got == 1, "exactly 1 value"),
        (_, Op::GtLt | Op::GeLe) => (got == 2, "exactly 2 values"),
    };
    if ok {
        Ok(())
    } else {
        Err(Problem::ValueCount {
            op: spelled.to_owned(),
            expected,
            got,
        })
    }
}

/// Compiles a pattern within the engine's size limits, so one pattern cannot take unbounded
/// memory (a too large one is an invalid regex saying so).
fn compile_regex(pattern: &str) -> Result<Regex, Problem> {
    RegexBuilder::new(pattern)
        .size_limit(LIMITS.regex_bytes)
        .dfa_size_limit(LIMITS.regex_bytes)
        .build()
        .map_err(|e| Problem::InvalidRegex {
            pattern: pattern.to_owned(),
            reason: regex_reason(&e),
        })
}

/// The regex crate's message spans several lines (pattern, caret, "error: ..."); keep the reason.
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or_else(|| text.lines().last().unwrap_or(""))
        .trim()
        .to_owned()
}

fn bounds(values: &[String], version: bool) -> Result<Bounds, Problem> {
    let first = values.first().map(String::as_str).unwrap_or("");
    let second = values.get(1).map(String::as_str).unwrap_or(first);
    if version {
        let parse = |v: &str| {
            parse_version(v).ok_or_else(|| Problem::NotVersion {
                value: v.to_owned(),
            })
        };
        return Ok(Bounds::Version(parse(first)?, parse(second)?));
    }
    let parse = |v: &str| {
        parse_int(v).ok_or_else(|| Problem::NotInteger {
            value: v.to_owned(),
        })
    };
    let (low, high) = (parse(first)?, parse(second)?);
    if values.len() == 2 && low >= high {
        return Err(Problem::EmptyRange {
            low: first.to_owned(),
            high: second.to_owned(),
        });
    }
    Ok(Bounds::Int(low, high))
}

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
