//! Artifacts beyond the engine's limits: refused before anything is compiled, with a message
//! naming the limit and where it was exceeded; the real examples stay well inside them.

use serde_json::{Value, json};

use super::parse_error;
use crate::engine::{Artifact, ArtifactError, Format, LIMITS};

fn expression(n: usize) -> Value {
    json!({"key": format!("k{n}"), "op": "In", "value": ["x"]})
}

fn ocifit_set(tag: &str, expressions: Vec<Value>) -> Value {
    json!({"tag": tag, "rules": [{"matchFeatures": [{"matchExpressions": expressions}]}]})
}

fn ocifit(sets: Vec<Value>) -> Value {
    json!({"version": "v1alpha1", "compatibilities": sets})
}

#[test]
fn too_many_sets_is_refused_naming_the_limit() {
    let sets = (0..=LIMITS.sets)
        .map(|i| json!({"tag": format!("img:{i}")}))
        .collect();
    assert_eq!(
        parse_error(Format::Ocifit, &ocifit(sets)),
        "the artifact: 1001 sets in the artifact, over the limit of 1000"
    );
}

#[test]
fn too_many_expressions_in_a_term_names_the_set_rule_and_term() {
    let many = (0..=LIMITS.expressions_per_term).map(expression).collect();
    let doc = ocifit(vec![json!({"tag": "a:1"}), ocifit_set("b:1", many)]);
    assert_eq!(
        parse_error(Format::Ocifit, &doc),
        "set 1 (\"b:1\"), rule 0, term 0: 257 expressions in the term, over the limit of 256"
    );
}

#[test]
fn too_many_values_names_the_expression() {
    let values: Vec<String> = (0..=LIMITS.values_per_expression)
        .map(|i| i.to_string())
        .collect();
    let expr = json!({"key": "k", "op": "NotIn", "value": values});
    let doc = ocifit(vec![ocifit_set("a:1", vec![expr])]);
    assert_eq!(
        parse_error(Format::Ocifit, &doc),
        "set 0 (\"a:1\"), rule 0, term 0, expression 0 (key \"k\", op NotIn): 1001 values in the expression, over the limit of 1000"
    );
}

#[test]
fn too_many_expressions_over_the_artifact_names_where_the_count_crossed() {
    let per_set = LIMITS.expressions_per_term;
    let sets = (0..=LIMITS.expressions / per_set)
        .map(|s| ocifit_set(&format!("img:{s}"), (0..per_set).map(expression).collect()))
        .collect();
    let got = parse_error(Format::Ocifit, &ocifit(sets));
    assert_eq!(
        got,
        "set 39 (\"img:39\"), rule 0, term 0, expression 16 (key \"k16\", op In): 10001 expressions in the artifact up to here, over the limit of 10000"
    );
}

#[test]
fn too_many_patterns_are_refused_before_any_is_compiled() {
    let exprs = (0..=LIMITS.patterns)
        .map(|i| json!({"key": format!("k{i}"), "op": "InRegexp", "value": ["("]}))
        .collect();
    let got = parse_error(Format::Ocifit, &ocifit(vec![ocifit_set("a:1", exprs)]));
    assert!(
        got.ends_with("101 InRegexp patterns in the artifact up to here, over the limit of 100"),
        "{got}"
    );
}

#[test]
fn a_long_string_or_key_is_refused_naming_its_path() {
    let long = "x".repeat(LIMITS.string_bytes + 1);
    let doc = ocifit(vec![json!({"tag": "a:1", "description": long})]);
    assert_eq!(
        parse_error(Format::Ocifit, &doc),
        "at compatibilities[0].description: 4097 bytes in a string, over the limit of 4096"
    );
    let expr = json!({"key": long, "op": "Exists"});
    let got = parse_error(Format::Ocifit, &ocifit(vec![ocifit_set("a:1", vec![expr])]));
    assert!(
        got.starts_with(
            "at compatibilities[0].rules[0].matchFeatures[0].matchExpressions[0].key: 4097 bytes"
        ),
        "{got}"
    );
    let set = json!({"tag": "a:1", long.clone(): "an unknown field"});
    let got = parse_error(Format::Ocifit, &ocifit(vec![set]));
    assert_eq!(
        got,
        "at compatibilities[0]: 4097 bytes in a key, over the limit of 4096"
    );
    assert!(
        !got.contains(&long),
        "the message does not repeat the string"
    );
}

#[test]
fn deep_nesting_is_refused() {
    let mut deep = json!("x");
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let doc = ocifit(vec![json!({"tag": "a:1", "description": deep})]);
    let got = parse_error(Format::Ocifit, &doc);
    assert!(
        got.contains("levels of nesting, over the limit of 32"),
        "{got}"
    );
}

#[test]
fn nfd_terms_under_match_any_count_towards_the_rule() {
    let term =
        |i: usize| json!({"feature": format!("f{i}"), "matchExpressions": {"e": {"op": "Exists"}}});
    let half = LIMITS.terms_per_rule / 2;
    let rule = json!({"name": "r", "matchFeatures": (0..=half).map(term).collect::<Vec<_>>(),
        "matchAny": [{"matchFeatures": (0..half).map(term).collect::<Vec<_>>()}]});
    let doc = json!({"compatibilities": [{"tag": "t", "rules": [rule]}]});
    assert_eq!(
        parse_error(Format::Nfd, &doc),
        "set 0 (\"t\"), rule 0 (\"r\"): 101 terms in the rule, over the limit of 100"
    );
}

#[test]
fn nfd_values_name_the_element() {
    let values: Vec<String> = (0..=LIMITS.values_per_expression)
        .map(|i| i.to_string())
        .collect();
    let doc = json!({"compatibilities": [{"tag": "t", "rules": [{"name": "r", "matchFeatures": [
        {"feature": "pci.device", "matchExpressions": {"vendor": {"op": "In", "value": values}}}]}]}]});
    assert_eq!(
        parse_error(Format::Nfd, &doc),
        "set 0 (\"t\"), rule 0 (\"r\"), term 0 (feature \"pci.device\"), element \"vendor\" (op In): 1001 values in the expression, over the limit of 1000"
    );
}

#[test]
fn a_pattern_too_large_to_compile_is_an_invalid_regex_naming_the_size_limit() {
    let expr = json!({"key": "k", "op": "InRegexp", "value": ["\\w{1000}\\w{1000}"]});
    let got = parse_error(Format::Ocifit, &ocifit(vec![ocifit_set("a:1", vec![expr])]));
    assert!(
        got.contains("invalid regular expression") && got.contains("size limit of 262144 bytes"),
        "{got}"
    );
}

#[test]
fn yaml_aliases_that_would_expand_enormously_are_refused() {
    let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        yaml.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    yaml.push_str("compatibilities: []\n");
    let err = Artifact::parse(Format::Nfd, yaml.as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            ArtifactError::Yaml { .. } | ArtifactError::TooLarge { .. }
        ),
        "{err}"
    );
}
