//! Invalid artifacts: each error names the set, rule, term and expression, and says what is
//! wrong; a document of the wrong format names the offending field.

use serde_json::{Value, json};

use super::parse_error;
use crate::engine::{Artifact, ArtifactError, Format, Problem};

fn ocifit_with(expression: Value) -> Value {
    json!({"version": "v1alpha1", "compatibilities": [
        {"tag": "debian:11", "rules": []},
        {"tag": "rockylinux:9", "rules": []},
        {"tag": "ubuntu:24.04", "rules": [{"matchFeatures": [{"matchExpressions": [
            {"key": "feature.node.kubernetes.io/system-os_release.ID", "op": "In", "value": "ubuntu"},
            expression]}]}]}]})
}

#[test]
fn ocifit_errors_name_set_rule_term_and_expression() {
    let key = "feature.node.kubernetes.io/kernel-version.major";
    let at = |op: &str| {
        format!("set 2 (\"ubuntu:24.04\"), rule 0, term 0, expression 1 (key \"{key}\", op {op}): ")
    };
    let cases = [
        (json!({"key": key, "op": "Gt", "value": "six"}), format!("{}value \"six\" is not an integer", at("Gt"))),
        (json!({"key": key, "op": "Gte", "value": ["6", "7"]}), format!("{}op Gte needs exactly 1 value, got 2", at("Gte"))),
        (json!({"key": key, "op": "Lt"}), format!("{}op Lt needs exactly 1 value, got 0", at("Lt"))),
        (json!({"key": key, "op": "In", "value": []}), format!("{}op In needs at least 1 value, got 0", at("In"))),
        (json!({"key": key, "op": "InRegexp", "value": ["("]}), format!("{}invalid regular expression \"(\": unclosed group", at("InRegexp"))),
        (json!({"key": key, "op": "IsTrue"}), format!("{}unknown operator \"IsTrue\" (the ocifit format knows In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge (Gte), Lt, Le (Lte))", at("IsTrue"))),
        (json!({"key": key, "op": "GtLt", "value": ["1", "2"]}), format!("{}unknown operator \"GtLt\"", at("GtLt"))),
        (json!({"key": key}), format!("{}unknown operator \"\"", at("\"\""))),
        (json!({"key": "", "op": "Exists"}), "set 2 (\"ubuntu:24.04\"), rule 0, term 0, expression 1 (key \"\", op Exists): key must not be empty".to_owned()),
    ];
    for (expression, expected) in cases {
        let got = parse_error(Format::Ocifit, &ocifit_with(expression.clone()));
        assert!(
            got.starts_with(&expected),
            "{expression}:\n got {got}\nwant {expected}"
        );
    }
}

#[test]
fn ocifit_invalid_expression_is_a_typed_problem() {
    let doc = ocifit_with(json!({"key": "k", "op": "Gt", "value": "six"}));
    let err = Artifact::parse(Format::Ocifit, doc.to_string().as_bytes()).err();
    let Some(ArtifactError::Invalid { at, problem }) = err else {
        panic!("expected an invalid expression, got {err:?}");
    };
    assert_eq!(
        problem,
        Problem::NotInteger {
            value: "six".to_owned()
        }
    );
    assert_eq!(
        (at.set, at.rule, at.term, at.expression),
        (2, Some(0), Some(0), Some(1))
    );
    assert_eq!(at.tag, "ubuntu:24.04");
}

#[test]
fn ocifit_set_without_tag_is_invalid() {
    let got = parse_error(Format::Ocifit, &json!({"compatibilities": [{"rules": []}]}));
    assert_eq!(got, "set 0 (\"\"): tag must not be empty");
}

fn nfd_with(expression: Value) -> Value {
    json!({"version": "v1alpha1", "compatibilities": [{"tag": "preferred", "rules": [
        {"name": "cpu", "matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX": {"op": "Exists"}}}]},
        {"name": "kernel and cpu", "matchFeatures": [
            {"feature": "cpu.cpuid", "matchName": {"op": "InRegexp", "value": ["^AVX"]}},
            {"feature": "kernel.version", "matchExpressions": {"major": expression}}]}]}]})
}

#[test]
fn nfd_errors_name_set_rule_term_feature_element_and_op() {
    let at = |op: &str| {
        format!(
            "set 0 (\"preferred\"), rule 1 (\"kernel and cpu\"), term 1 (feature \"kernel.version\"), element \"major\" (op {op}): "
        )
    };
    let cases = [
        (
            json!({"op": "Gt", "value": ["six"]}),
            "value \"six\" is not an integer",
            "Gt",
        ),
        (
            json!({"op": "Ge", "value": ["6", "7"]}),
            "op Ge needs exactly 1 value, got 2",
            "Ge",
        ),
        (
            json!({"op": "Gt"}),
            "op Gt needs exactly 1 value, got 0",
            "Gt",
        ),
        (
            json!({"op": "GtLt", "value": ["6"]}),
            "op GtLt needs exactly 2 values, got 1",
            "GtLt",
        ),
        (
            json!({"op": "GeLe", "value": ["7", "6"]}),
            "range values must be increasing, got \"7\" then \"6\"",
            "GeLe",
        ),
        (
            json!({"op": "GtLt", "value": ["6", "6"]}),
            "range values must be increasing, got \"6\" then \"6\"",
            "GtLt",
        ),
        (
            json!({"op": "In", "value": []}),
            "op In needs at least 1 value, got 0",
            "In",
        ),
        (
            json!({"op": "NotIn"}),
            "op NotIn needs at least 1 value, got 0",
            "NotIn",
        ),
        (
            json!({"op": "InRegexp", "value": ["a", "[z-a]"]}),
            "invalid regular expression \"[z-a]\": invalid character class range, the start must be <= the end",
            "InRegexp",
        ),
        (
            json!({"op": "Exists", "value": ["x"]}),
            "op Exists needs no value, got 1",
            "Exists",
        ),
        (
            json!({"op": "DoesNotExist", "value": ["x"]}),
            "op DoesNotExist needs no value, got 1",
            "DoesNotExist",
        ),
        (
            json!({"op": "IsTrue", "value": ["true"]}),
            "op IsTrue needs no value, got 1",
            "IsTrue",
        ),
        (
            json!({"op": "IsFalse", "value": ["false"]}),
            "op IsFalse needs no value, got 1",
            "IsFalse",
        ),
        (
            json!({"op": "", "value": ["x"]}),
            "op \"\" needs no value, got 1",
            "\"\"",
        ),
        (
            json!({"op": "Ge", "value": ["six"], "type": "version"}),
            "value \"six\" is not a version (%d, %d.%d or %d.%d.%d, optional suffix)",
            "Ge",
        ),
        (
            json!({"op": "Ge", "value": ["1.2.3.4"], "type": "version"}),
            "value \"1.2.3.4\" is not a version",
            "Ge",
        ),
        (
            json!({"op": "Ge", "value": ["6"], "type": "semver"}),
            "unknown type \"semver\" (only \"version\" is defined)",
            "Ge",
        ),
        (
            json!({"op": "Gte", "value": ["x"]}),
            "value \"x\" is not an integer",
            "Gte",
        ),
        (
            json!({"op": "Equals", "value": ["6"]}),
            "unknown operator \"Equals\" (the nfd format knows",
            "Equals",
        ),
    ];
    for (expression, problem, op) in cases {
        let got = parse_error(Format::Nfd, &nfd_with(expression.clone()));
        let expected = format!("{}{problem}", at(op));
        assert!(
            got.starts_with(&expected),
            "{expression}:\n got {got}\nwant {expected}"
        );
    }
}

#[test]
fn nfd_match_name_and_match_any_errors_say_where() {
    let doc = json!({"compatibilities": [{"tag": "t", "rules": [{"name": "nics", "matchAny": [
        {"matchFeatures": [{"feature": "pci.device"}]},
        {"matchFeatures": [{"feature": "pci.device", "matchName": {"op": "InRegexp", "value": ["("]}}]}]}]}]});
    assert_eq!(
        parse_error(Format::Nfd, &doc),
        "set 0 (\"t\"), rule 0 (\"nics\"), matchAny 1, term 0 (feature \"pci.device\"), matchName (op InRegexp): invalid regular expression \"(\": unclosed group"
    );
    let empty = json!({"compatibilities": [{"rules": [{"matchFeatures": [{"feature": ""}]}]}]});
    assert_eq!(
        parse_error(Format::Nfd, &empty),
        "set 0 (\"\"), rule 0, term 0 (feature \"\"): feature must not be empty"
    );
}

#[test]
fn ocifit_document_read_as_nfd_names_the_offending_field() {
    let flavor = include_bytes!("../../../../example/flavor-compat.json");
    let err = Artifact::parse(Format::Nfd, flavor)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some(
            "nfd artifact, set 0 (\"debian:11\"), at rules[0].matchFeatures[0].matchExpressions: \
             invalid type: sequence, expected a map \
             (this looks like an ocifit artifact: its matchExpressions is a list of {key, op, value})"
        )
    );
}

#[test]
fn nfd_document_read_as_ocifit_names_the_offending_field() {
    let nfd = serde_saphyr::from_str::<Value>(include_str!("../../../../example/nfd-compat.yaml"))
        .expect("the example is YAML");
    let got = parse_error(Format::Ocifit, &nfd);
    assert!(
        got.starts_with("ocifit artifact, set 0 (\"registry.example.com/acme/app:v1-cuda\"), at rules[0].matchAny: unknown field `matchAny`"),
        "{got}"
    );
    assert!(got.ends_with("(this looks like an NFD artifact: it has NFD's map-form matchExpressions, feature, matchName or matchAny)"), "{got}");
}

#[test]
fn unknown_fields_are_rejected_in_the_structure() {
    let cases = [
        (
            Format::Ocifit,
            json!({"compatibilities": [], "extra": 1}),
            "ocifit artifact, document, at extra: unknown field `extra`, expected `version` or `compatibilities`",
        ),
        (
            Format::Ocifit,
            json!({"compatibilities": [{"tag": "t", "weigth": 3}]}),
            "ocifit artifact, set 0 (\"t\"), at weigth: unknown field `weigth`",
        ),
        (
            Format::Ocifit,
            json!({"compatibilities": [{"tag": "t", "rules": [{"matchFeatures": [{"matchExpressions": [{"key": "k", "op": "Exists", "type": "version"}]}]}]}]}),
            "ocifit artifact, set 0 (\"t\"), at rules[0].matchFeatures[0].matchExpressions[0].type: unknown field `type`",
        ),
        (
            Format::Nfd,
            json!({"compatibilities": [{"tag": "t", "rules": [{"matchFeatures": [{"feature": "f", "matchExpression": {}}]}]}]}),
            "nfd artifact, set 0 (\"t\"), at rules[0].matchFeatures[0].matchExpression: unknown field `matchExpression`",
        ),
        (
            Format::Nfd,
            json!({"compatibilities": [{"tag": "t", "rules": [{"matchFeatures": [{"feature": "f", "matchExpressions": {"e": {"op": "In", "value": "x"}}}]}]}]}),
            "nfd artifact, set 0 (\"t\"), at rules[0].matchFeatures[0].matchExpressions.e.value: invalid type: string \"x\", expected a list of strings (NFD's value is always a list)",
        ),
        (
            Format::Nfd,
            json!({"version": "v1alpha1"}),
            "nfd artifact, document: missing field `compatibilities`",
        ),
    ];
    for (format, doc, expected) in cases {
        let got = parse_error(format, &doc);
        assert!(
            got.starts_with(expected),
            "{doc}:\n got {got}\nwant {expected}"
        );
    }
}

#[test]
fn nfd_vars_and_vars_template_are_accepted_and_ignored() {
    let doc = json!({"compatibilities": [{"tag": "t", "rules": [{"name": "r",
        "vars": {"a": "b"}, "varsTemplate": "{{ range .cpu.cpuid }}x{{ end }}",
        "matchFeatures": [{"feature": "cpu.cpuid"}]}]}]});
    assert!(Artifact::parse(Format::Nfd, doc.to_string().as_bytes()).is_ok());
}

#[test]
fn unparsable_bytes_are_syntax_errors() {
    let json = Artifact::parse(Format::Ocifit, b"compatibilities: []").err();
    assert!(matches!(json, Some(ArtifactError::Json { .. })), "{json:?}");
    let yaml = Artifact::parse(Format::Nfd, b"compatibilities: [\n").err();
    assert!(matches!(yaml, Some(ArtifactError::Yaml { .. })), "{yaml:?}");
}

#[test]
fn an_nfd_set_without_a_tag_parses_but_cannot_name_an_image() {
    let doc = "version: v1alpha1\ncompatibilities:\n- tag: registry.example.com/app:v1-avx2\n  rules: []\n- description: no tag here\n  rules: []\n";
    let artifact = Artifact::parse(Format::Nfd, doc.as_bytes()).unwrap();
    let err = artifact.require_image_tags().unwrap_err().to_string();
    assert!(
        err.starts_with("set 1 (\"\"): tag must not be empty"),
        "{err}"
    );
    let tagged =
        "version: v1alpha1\ncompatibilities:\n- tag: registry.example.com/app:v1\n  rules: []\n";
    assert!(
        Artifact::parse(Format::Nfd, tagged.as_bytes())
            .unwrap()
            .require_image_tags()
            .is_ok()
    );
}
