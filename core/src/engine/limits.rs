//! How large an artifact the engine reads: counts of sets, rules, terms, expressions, values and
//! patterns, string lengths and nesting, checked on the parsed document before anything is
//! compiled, so an artifact cannot make the operator spend unbounded memory or CPU (every node
//! class is evaluated against every expression). A breach names the limit and where it is. The
//! artifact's size in bytes is bounded before this, by the registry client
//! (`--max-artifact-bytes`). Owns no parsing beyond walking the generic document.

use serde_json::Value;

use super::Format;
use super::error::{ArtifactError, Location};

/// The limits on one artifact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Compatibility sets in the artifact.
    pub sets: usize,
    /// Rules in one set.
    pub rules_per_set: usize,
    /// Terms (`matchFeatures` entries, those under `matchAny` included) in one rule.
    pub terms_per_rule: usize,
    /// Expressions in one term (an NFD `matchName` counts as one).
    pub expressions_per_term: usize,
    /// Values of one expression.
    pub values_per_expression: usize,
    /// Expressions in the whole artifact.
    pub expressions: usize,
    /// Values in the whole artifact.
    pub values: usize,
    /// `InRegexp` patterns in the whole artifact (each compiled, so each costs memory).
    pub patterns: usize,
    /// Bytes of any one string or map key (tags, keys, values, patterns, descriptions).
    pub string_bytes: usize,
    /// Levels of nested lists and maps.
    pub depth: usize,
    /// Bytes a compiled pattern may take, and its lazy DFA's cache (`regex` size limits).
    pub regex_bytes: usize,
}

/// The limits the engine applies. Real artifacts list a handful of sets with a few expressions
/// each; these are orders of magnitude above that, and below what a status or a node class
/// evaluation can bear.
pub const LIMITS: Limits = Limits {
    sets: 1_000,
    rules_per_set: 100,
    terms_per_rule: 100,
    expressions_per_term: 256,
    values_per_expression: 1_000,
    expressions: 10_000,
    values: 100_000,
    patterns: 100,
    string_bytes: 4_096,
    depth: 32,
    regex_bytes: 256 * 1024,
};

/// Checks a parsed document against `limits`: strings and nesting everywhere, then the counts
/// along the format's shape. Parts that do not have the format's shape are left to the parser,
/// which names them.
pub(crate) fn check(format: Format, doc: &Value, limits: &Limits) -> Result<(), ArtifactError> {
    let mut path = Vec::new();
    strings(doc, &mut path, limits)?;
    let Some(sets) = doc.get("compatibilities").and_then(Value::as_array) else {
        return Ok(());
    };
    let mut totals = Totals::default();
    exceeds(sets.len(), limits.sets, "sets in the artifact", || {
        "the artifact".to_owned()
    })?;
    for (index, set) in sets.iter().enumerate() {
        let tag = set.get("tag").and_then(Value::as_str).unwrap_or_default();
        let base = Location::set(index, tag);
        let rules = list(set, "rules");
        exceeds(
            rules.len(),
            limits.rules_per_set,
            "rules in the set",
            || base.to_string(),
        )?;
        for (r, rule) in rules.iter().enumerate() {
            let at = Location {
                rule: Some(r),
                rule_name: rule.get("name").and_then(Value::as_str).map(str::to_owned),
                ..base.clone()
            };
            let walker = Walker {
                format,
                limits,
                rule: &at,
            };
            walker.rule(rule, &mut totals)?;
        }
    }
    Ok(())
}

/// Counts over the whole artifact.
#[derive(Default)]
struct Totals {
    expressions: usize,
    values: usize,
    patterns: usize,
}

struct Walker<'a> {
    format: Format,
    limits: &'a Limits,
    rule: &'a Location,
}

impl Walker<'_> {
    fn rule(&self, rule: &Value, totals: &mut Totals) -> Result<(), ArtifactError> {
        let mut terms: Vec<(Option<usize>, usize, &Value)> = list(rule, "matchFeatures")
            .iter()
            .enumerate()
            .map(|(t, term)| (None, t, term))
            .collect();
        if self.format == Format::Nfd {
            for (a, any) in list(rule, "matchAny").iter().enumerate() {
                let inner = list(any, "matchFeatures").iter().enumerate();
                terms.extend(inner.map(|(t, term)| (Some(a), t, term)));
            }
        }
        exceeds(
            terms.len(),
            self.limits.terms_per_rule,
            "terms in the rule",
            || self.rule.to_string(),
        )?;
        for (match_any, t, term) in terms {
            let at = Location {
                match_any,
                term: Some(t),
                feature: term
                    .get("feature")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                ..self.rule.clone()
            };
            self.term(term, &at, totals)?;
        }
        Ok(())
    }

    fn term(&self, term: &Value, at: &Location, totals: &mut Totals) -> Result<(), ArtifactError> {
        let expressions: Vec<(Location, &Value)> = match self.format {
            Format::Ocifit => list(term, "matchExpressions")
                .iter()
                .enumerate()
                .map(|(e, expr)| {
                    let key = expr.get("key").and_then(Value::as_str).map(str::to_owned);
                    let here = Location {
                        expression: Some(e),
                        key,
                        ..at.clone()
                    };
                    (here, expr)
                })
                .collect(),
            Format::Nfd => {
                let map = term.get("matchExpressions").and_then(Value::as_object);
                let elements = map.into_iter().flatten().map(|(element, expr)| {
                    let here = Location {
                        key: Some(element.clone()),
                        ..at.clone()
                    };
                    (here, expr)
                });
                let name = term.get("matchName").map(|expr| {
                    let here = Location {
                        match_name: true,
                        ..at.clone()
                    };
                    (here, expr)
                });
                elements.chain(name).collect()
            }
        };
        let limits = self.limits;
        exceeds(
            expressions.len(),
            limits.expressions_per_term,
            "expressions in the term",
            || at.to_string(),
        )?;
        for (here, expr) in expressions {
            let op = expr.get("op").and_then(Value::as_str).unwrap_or_default();
            let here = Location {
                op: Some(op.to_owned()),
                ..here
            };
            let values = match expr.get("value") {
                Some(Value::Array(values)) => values.len(),
                Some(Value::Null) | None => 0,
                Some(_) => 1,
            };
            exceeds(
                values,
                limits.values_per_expression,
                "values in the expression",
                || here.to_string(),
            )?;
            totals.expressions += 1;
            totals.values += values;
            if op == "InRegexp" {
                totals.patterns += values;
            }
            exceeds(
                totals.expressions,
                limits.expressions,
                "expressions in the artifact up to here",
                || here.to_string(),
            )?;
            exceeds(
                totals.values,
                limits.values,
                "values in the artifact up to here",
                || here.to_string(),
            )?;
            exceeds(
                totals.patterns,
                limits.patterns,
                "InRegexp patterns in the artifact up to here",
                || here.to_string(),
            )?;
        }
        Ok(())
    }
}

/// The list under `field`, or none when it is absent or not a list.
fn list<'a>(value: &'a Value, field: &str) -> &'a [Value] {
    value
        .get(field)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn exceeds(
    found: usize,
    limit: usize,
    what: &'static str,
    at: impl FnOnce() -> String,
) -> Result<(), ArtifactError> {
    if found > limit {
        Err(ArtifactError::TooLarge {
            at: at(),
            what,
            found,
            limit,
        })
    } else {
        Ok(())
    }
}

/// Every string and key within `string_bytes`, and nesting within `depth`. `path` is where the
/// walk is (`compatibilities[2].rules[0]`), for the message.
fn strings(value: &Value, path: &mut Vec<String>, limits: &Limits) -> Result<(), ArtifactError> {
    let here = |path: &[String]| {
        if path.is_empty() {
            "the document".to_owned()
        } else {
            format!("at {}", path.concat().trim_start_matches('.'))
        }
    };
    exceeds(path.len(), limits.depth, "levels of nesting", || here(path))?;
    match value {
        Value::String(text) => {
            exceeds(text.len(), limits.string_bytes, "bytes in a string", || {
                here(path)
            })
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(format!("[{i}]"));
                strings(item, path, limits)?;
                path.pop();
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                exceeds(key.len(), limits.string_bytes, "bytes in a key", || {
                    here(path)
                })?;
                path.push(format!(".{}", short(key)));
                strings(item, path, limits)?;
                path.pop();
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

/// A key as a path shows it: at most 64 characters, control characters as `?`.
fn short(key: &str) -> String {
    let mut out: String = key
        .chars()
        .take(64)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if key.chars().nth(64).is_some() {
        out.push('…');
    }
    out
}
