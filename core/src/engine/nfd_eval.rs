//! Evaluating NFD rules on a node's features, with NFD's semantics (`nodefeaturerule.MatchMulti`
//! and `MatchNamesMulti`): a term on a missing feature does not match; flag and attribute
//! elements are checked together (an expression holds if it holds on either, and `DoesNotExist`
//! must hold on both); otherwise an instance feature matches when ANY single instance satisfies
//! all expressions; `matchName` holds when any element name (flags, attributes, instance
//! attributes) satisfies it. Where NFD would stop with an evaluation error (a non-integer or
//! non-version node value), the term does not match and the reason says so. Results never
//! depend on the order of instances, so nodes grouped into one class get one answer.

use std::collections::{BTreeMap, BTreeSet};

use super::error::Location;
use super::explain::Miss;
use super::inputs::Features;
use super::nfd::{Rule, Term};
use super::op::{Check, Expr, Input, Op};

/// Why a term failed: the reason, and the element or `matchName` that failed (if one did).
struct TermMiss {
    reason: String,
    element: Option<(String, String)>,
    match_name: Option<String>,
}

impl Rule {
    /// Checks the rule: its `matchAny` first (as NFD does), then its `matchFeatures`.
    pub(crate) fn evaluate(
        &self,
        base: &Location,
        r: usize,
        features: &Features,
    ) -> Result<(), Miss> {
        let base = Location {
            rule: Some(r),
            rule_name: self.name.clone(),
            ..base.clone()
        };
        if !self.any.is_empty() {
            let mut first = None;
            for (a, terms) in self.any.iter().enumerate() {
                let at = Location {
                    match_any: Some(a),
                    ..base.clone()
                };
                match evaluate_terms(&at, terms, features) {
                    Ok(()) => {
                        first = None;
                        break;
                    }
                    Err(miss) => {
                        first.get_or_insert(miss);
                    }
                }
            }
            if let Some(miss) = first {
                return Err(Miss {
                    reason: format!(
                        "none of the {} matchAny elements matched; matchAny 0: {}",
                        self.any.len(),
                        miss.reason
                    ),
                    at: miss.at,
                });
            }
        }
        evaluate_terms(&base, &self.terms, features)
    }
}

fn evaluate_terms(base: &Location, terms: &[Term], features: &Features) -> Result<(), Miss> {
    for (t, term) in terms.iter().enumerate() {
        if let Err(miss) = evaluate_term(term, features) {
            let (key, op) = match (miss.element, miss.match_name) {
                (Some((element, op)), _) => (Some(element), Some(op)),
                (None, Some(op)) => (None, Some(op)),
                (None, None) => (None, None),
            };
            return Err(Miss {
                reason: miss.reason,
                at: Box::new(Location {
                    term: Some(t),
                    feature: Some(term.feature.clone()),
                    match_name: key.is_none() && op.is_some(),
                    key,
                    op,
                    ..base.clone()
                }),
            });
        }
    }
    Ok(())
}

fn evaluate_term(term: &Term, features: &Features) -> Result<(), TermMiss> {
    let f = term.feature.as_str();
    let flags = features.flags.get(f);
    let attributes = features.attributes.get(f);
    let instances = features.instances.get(f);
    if flags.is_none() && attributes.is_none() && instances.is_none() {
        return Err(TermMiss {
            reason: format!("feature {f:?} is not present on the node"),
            element: None,
            match_name: None,
        });
    }
    if let Some(expressions) = &term.expressions {
        let mut miss = None;
        if flags.is_some() || attributes.is_some() {
            miss = check_elements(f, expressions, flags, attributes).err();
            if miss.is_none() {
                return check_names(term, features);
            }
        }
        if let Some(instances) = instances {
            match check_instances(f, expressions, instances) {
                Ok(true) => return check_names(term, features),
                Ok(false) => {}
                Err(error) => return Err(error),
            }
            miss.get_or_insert_with(|| TermMiss {
                reason: no_instance(f, expressions),
                element: None,
                match_name: None,
            });
        }
        if let Some(miss) = miss {
            return Err(miss);
        }
    }
    check_names(term, features)
}

/// Flag and attribute elements, as a union: each expression must hold on one of them.
fn check_elements(
    feature: &str,
    expressions: &[(String, Expr)],
    flags: Option<&BTreeSet<String>>,
    attributes: Option<&BTreeMap<String, String>>,
) -> Result<(), TermMiss> {
    for (element, expr) in expressions {
        let flag = flags.map(|set| {
            if set.contains(element) {
                Input::Flag
            } else {
                Input::Missing
            }
        });
        let value =
            attributes.map(|map| map.get(element).map_or(Input::Missing, |v| Input::Value(v)));
        let on_flag = flag.map(|input| expr.check(input));
        let on_value = value.map(|input| expr.check(input));
        let subject = || format!("element {element:?} of feature {feature:?}");
        if let (Some(input), Some(check @ (Check::NotInteger | Check::NotVersion))) =
            (value, on_value)
        {
            return Err(element_miss(
                expr,
                element,
                expr.why(&subject(), input, check),
            ));
        }
        let mut holds = on_flag == Some(Check::Pass) || on_value == Some(Check::Pass);
        if expr.op() == Op::DoesNotExist {
            holds &= on_flag != Some(Check::Fail) && on_value != Some(Check::Fail);
        }
        if !holds {
            // Explain on the input that has the element (an attribute value is most telling).
            let input = match (value, flag) {
                (Some(v @ Input::Value(_)), _) => v,
                (_, Some(Input::Flag)) => Input::Flag,
                _ => Input::Missing,
            };
            let check = expr.check(input);
            return Err(element_miss(
                expr,
                element,
                expr.why(&subject(), input, check),
            ));
        }
    }
    Ok(())
}

fn element_miss(expr: &Expr, element: &str, reason: String) -> TermMiss {
    TermMiss {
        reason,
        element: Some((element.to_owned(), expr.spelled.clone())),
        match_name: None,
    }
}

/// Instances: does any single instance satisfy every expression? Like NFD, an evaluation error
/// in any instance is an error; the reported one is the first expression (by element name) that
/// errs, with its smallest offending value, so the answer does not depend on instance order.
fn check_instances(
    feature: &str,
    expressions: &[(String, Expr)],
    instances: &[BTreeMap<String, String>],
) -> Result<bool, TermMiss> {
    let mut matched = false;
    let mut error: Option<(usize, &str, Check)> = None;
    for instance in instances {
        let mut all = true;
        for (i, (element, expr)) in expressions.iter().enumerate() {
            let value = instance.get(element);
            let check = expr.check(value.map_or(Input::Missing, |v| Input::Value(v)));
            match (check, value) {
                (Check::Pass, _) => {}
                (Check::NotInteger | Check::NotVersion, Some(v)) => {
                    all = false;
                    let better = match error {
                        None => true,
                        Some((j, w, _)) => (i, v.as_str()) < (j, w),
                    };
                    if better {
                        error = Some((i, v, check));
                    }
                }
                _ => all = false,
            }
        }
        matched |= all;
    }
    if let Some((i, value, check)) = error {
        let (element, expr) = &expressions[i];
        let subject = format!("element {element:?} of an instance of feature {feature:?}");
        return Err(element_miss(
            expr,
            element,
            expr.why(&subject, Input::Value(value), check),
        ));
    }
    Ok(matched)
}

fn no_instance(feature: &str, expressions: &[(String, Expr)]) -> String {
    if expressions.is_empty() {
        return format!("feature {feature:?} has no instance");
    }
    let all: Vec<String> = expressions.iter().map(|(e, x)| x.display_on(e)).collect();
    format!(
        "feature {feature:?} has no instance with {}",
        all.join(" and ")
    )
}

/// `matchName`: some element name of the feature satisfies the expression.
fn check_names(term: &Term, features: &Features) -> Result<(), TermMiss> {
    let Some(expr) = &term.name else {
        return Ok(());
    };
    let names = element_names(&term.feature, features);
    let mut found = false;
    for name in &names {
        match expr.check(Input::Value(name)) {
            Check::Pass => found = true,
            Check::Fail => {}
            check => {
                let subject = format!("element name of feature {:?}", term.feature);
                return Err(TermMiss {
                    reason: expr.why(&subject, Input::Value(name), check),
                    element: None,
                    match_name: Some(expr.spelled.clone()),
                });
            }
        }
    }
    if found {
        Ok(())
    } else {
        Err(TermMiss {
            reason: expr.why_no_name(&term.feature),
            element: None,
            match_name: Some(expr.spelled.clone()),
        })
    }
}

/// Every element name of a feature: flags, attributes and the attribute names of its instances.
fn element_names<'a>(feature: &str, features: &'a Features) -> BTreeSet<&'a str> {
    let mut names = BTreeSet::new();
    if let Some(flags) = features.flags.get(feature) {
        names.extend(flags.iter().map(String::as_str));
    }
    if let Some(attributes) = features.attributes.get(feature) {
        names.extend(attributes.keys().map(String::as_str));
    }
    if let Some(instances) = features.instances.get(feature) {
        names.extend(instances.iter().flat_map(|i| i.keys().map(String::as_str)));
    }
    names
}
