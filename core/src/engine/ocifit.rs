//! The ocifit (compspec/ocifit-k8s) format: its JSON shape, its validation, and its compiled
//! rules, which read node labels. Differences from the seed, on purpose: an unknown operator, a
//! bad pattern, a missing or non-integer comparison value, an empty `In` list or an empty tag is
//! an invalid artifact instead of a silent non-match, and a comparison takes exactly one value.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Format;
use super::doc::{self, CompiledSet, Tag};
use super::error::{ArtifactError, Location, Problem};
use super::explain::Miss;
use super::inputs::Reads;
use super::op::{Check, Expr, Input};
use super::value::one_or_many;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDoc {
    #[serde(default, rename = "matchFeatures")]
    match_features: Option<Vec<TermDoc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TermDoc {
    #[serde(default, rename = "matchExpressions")]
    match_expressions: Option<Vec<ExprDoc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExprDoc {
    key: String,
    // A missing op reads as "", which is then reported as an unknown operator.
    #[serde(default)]
    op: String,
    #[serde(default, deserialize_with = "one_or_many")]
    value: Vec<String>,
}

/// One rule: every expression of every term must hold.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    terms: Vec<Vec<LabelExpr>>,
}

#[derive(Clone, Debug)]
struct LabelExpr {
    key: String,
    expr: Expr,
}

pub(crate) fn compile_set(
    index: usize,
    value: &serde_json::Value,
) -> Result<CompiledSet<Rule>, ArtifactError> {
    doc::compile_set(Format::Ocifit, Tag::Required, index, value, compile_rule)
}

fn compile_rule(base: &Location, r: usize, rule: RuleDoc) -> Result<Rule, ArtifactError> {
    let mut terms = Vec::new();
    for (t, term) in rule
        .match_features
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let mut exprs = Vec::new();
        for (e, doc) in term
            .match_expressions
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let at = Location {
                rule: Some(r),
                term: Some(t),
                expression: Some(e),
                key: Some(doc.key.clone()),
                op: Some(doc.op.clone()),
                ..base.clone()
            };
            let invalid = |problem| ArtifactError::Invalid {
                at: Box::new(at.clone()),
                problem,
            };
            if doc.key.is_empty() {
                return Err(invalid(Problem::Empty { field: "key" }));
            }
            let expr = Expr::compile(Format::Ocifit, &doc.op, doc.value, None).map_err(invalid)?;
            exprs.push(LabelExpr { key: doc.key, expr });
        }
        terms.push(exprs);
    }
    Ok(Rule { terms })
}

impl Rule {
    pub(crate) fn add_reads(&self, reads: &mut Reads) {
        for e in self.terms.iter().flatten() {
            reads.labels.insert(e.key.clone());
        }
    }

    /// Checks the rule on a node's labels; the first failing expression explains a miss.
    pub(crate) fn evaluate(
        &self,
        base: &Location,
        r: usize,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), Miss> {
        for (t, term) in self.terms.iter().enumerate() {
            for (e, LabelExpr { key, expr }) in term.iter().enumerate() {
                let input = labels.get(key).map_or(Input::Missing, |v| Input::Value(v));
                let check = expr.check(input);
                if check != Check::Pass {
                    return Err(Miss {
                        reason: expr.why(&format!("label {key:?}"), input, check),
                        at: Box::new(Location {
                            rule: Some(r),
                            term: Some(t),
                            expression: Some(e),
                            key: Some(key.clone()),
                            op: Some(expr.spelled.clone()),
                            ..base.clone()
                        }),
                    });
                }
            }
        }
        Ok(())
    }
}
