//! The NFD image-compatibility v1alpha1 format: its shape (GroupRule with `name`,
//! `matchFeatures` terms in MAP form, `matchName`, `matchAny`), its validation (NFD's value
//! counts, patterns, integers, `type: version`), and its compiled rules, which read NFD features.
//! Evaluation lives in `nfd_eval`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::Format;
use super::doc::{self, CompiledSet, Tag};
use super::error::{ArtifactError, Location, Problem};
use super::inputs::Reads;
use super::op::Expr;
use super::value::list_only;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDoc {
    #[serde(default)]
    name: Option<String>,
    // NFD's GroupRule allows `vars` and `varsTemplate` (backreferences through the `rule.matched`
    // feature). They are accepted so that NFD's own artifacts parse, and ignored: a term on
    // `rule.matched` therefore sees no such feature and does not match.
    #[serde(default, rename = "vars")]
    _vars: Option<IgnoredAny>,
    #[serde(default, rename = "varsTemplate")]
    _vars_template: Option<IgnoredAny>,
    #[serde(default, rename = "matchFeatures")]
    match_features: Option<Vec<TermDoc>>,
    #[serde(default, rename = "matchAny")]
    match_any: Option<Vec<AnyDoc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnyDoc {
    #[serde(default, rename = "matchFeatures")]
    match_features: Option<Vec<TermDoc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TermDoc {
    feature: String,
    #[serde(default, rename = "matchExpressions")]
    match_expressions: Option<BTreeMap<String, ExprDoc>>,
    #[serde(default, rename = "matchName")]
    match_name: Option<ExprDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExprDoc {
    // A missing op is NFD's "" (always holds).
    #[serde(default)]
    op: String,
    #[serde(default, deserialize_with = "list_only")]
    value: Vec<String>,
    #[serde(default, rename = "type")]
    ty: Option<String>,
}

/// One GroupRule: (no matchAny, or any matchAny element holds) and every term holds.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    pub(crate) name: Option<String>,
    pub(crate) terms: Vec<Term>,
    pub(crate) any: Vec<Vec<Term>>,
}

/// One term on one feature.
#[derive(Clone, Debug)]
pub(crate) struct Term {
    /// Lower-cased, as NFD looks features up.
    pub(crate) feature: String,
    /// Element name → expression, sorted by name (NFD iterates a map; we report in name order).
    /// `None` and an empty map differ, as in NFD: with no map only the feature's presence counts.
    pub(crate) expressions: Option<Vec<(String, Expr)>>,
    pub(crate) name: Option<Expr>,
}

pub(crate) fn compile_set(
    index: usize,
    value: &serde_json::Value,
) -> Result<CompiledSet<Rule>, ArtifactError> {
    doc::compile_set(Format::Nfd, Tag::Optional, index, value, compile_rule)
}

/// One rule: its `matchFeatures` terms and each `matchAny` element's.
fn compile_rule(base: &Location, r: usize, rule: RuleDoc) -> Result<Rule, ArtifactError> {
    let name = rule.name.filter(|n| !n.is_empty());
    let base = Location {
        rule: Some(r),
        rule_name: name.clone(),
        ..base.clone()
    };
    let terms = compile_terms(&base, rule.match_features)?;
    let any = rule
        .match_any
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(a, elem)| {
            let base = Location {
                match_any: Some(a),
                ..base.clone()
            };
            compile_terms(&base, elem.match_features)
        })
        .collect::<Result<_, _>>()?;
    Ok(Rule { name, terms, any })
}

fn compile_terms(base: &Location, terms: Option<Vec<TermDoc>>) -> Result<Vec<Term>, ArtifactError> {
    terms
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(t, term)| {
            let at = Location {
                term: Some(t),
                feature: Some(term.feature.clone()),
                ..base.clone()
            };
            if term.feature.is_empty() {
                return Err(ArtifactError::Invalid {
                    at: Box::new(at),
                    problem: Problem::Empty { field: "feature" },
                });
            }
            let expressions = term
                .match_expressions
                .map(|map| {
                    map.into_iter()
                        .map(|(element, doc)| {
                            let at = Location {
                                key: Some(element.clone()),
                                op: Some(doc.op.clone()),
                                ..at.clone()
                            };
                            compile_expr(at, doc).map(|e| (element, e))
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?;
            let name = term
                .match_name
                .map(|doc| {
                    let at = Location {
                        match_name: true,
                        op: Some(doc.op.clone()),
                        ..at.clone()
                    };
                    compile_expr(at, doc)
                })
                .transpose()?;
            Ok(Term {
                feature: term.feature.to_lowercase(),
                expressions,
                name,
            })
        })
        .collect()
}

fn compile_expr(at: Location, doc: ExprDoc) -> Result<Expr, ArtifactError> {
    Expr::compile(Format::Nfd, &doc.op, doc.value, doc.ty.as_deref()).map_err(|problem| {
        ArtifactError::Invalid {
            at: Box::new(at),
            problem,
        }
    })
}

impl Rule {
    pub(crate) fn add_reads(&self, reads: &mut Reads) {
        for term in self.terms.iter().chain(self.any.iter().flatten()) {
            let feature = reads.features.entry(term.feature.clone()).or_default();
            for (element, _) in term.expressions.iter().flatten() {
                feature.elements.insert(element.clone());
            }
            feature.names |= term.name.is_some();
        }
    }
}
