//! Every ocifit operator on node labels, including where ocifit differs from NFD.

use serde_json::{Value, json};

use super::{fit, node, ocifit_one};
use crate::engine::SetStatus;

const KEY: &str = "feature.node.kubernetes.io/kernel-version.major";

/// (op, value, the node's label value or None for absent, matches, reason when it does not)
fn cases() -> Vec<(
    &'static str,
    Value,
    Option<&'static str>,
    bool,
    &'static str,
)> {
    let absent = "label \"feature.node.kubernetes.io/kernel-version.major\" is absent";
    vec![
        ("In", json!(["5", "6"]), Some("6"), true, ""),
        (
            "In",
            json!(["5", "6"]),
            Some("7"),
            false,
            "is \"7\", not in [5, 6]",
        ),
        ("In", json!(["6"]), None, false, absent),
        ("In", json!("6"), Some("6"), true, ""),
        ("NotIn", json!(["5"]), Some("6"), true, ""),
        (
            "NotIn",
            json!(["5", "6"]),
            Some("6"),
            false,
            "is \"6\", which is in [5, 6]",
        ),
        ("NotIn", json!(["5"]), None, true, ""),
        ("InRegexp", json!(["^6$", "^7"]), Some("7"), true, ""),
        ("InRegexp", json!(["6"]), Some("16"), true, ""),
        (
            "InRegexp",
            json!(["^6$"]),
            Some("16"),
            false,
            "is \"16\", matching none of [^6$]",
        ),
        ("InRegexp", json!(["."]), None, false, absent),
        ("Exists", json!(null), Some(""), true, ""),
        ("Exists", json!(["ignored"]), Some("6"), true, ""),
        ("Exists", json!(null), None, false, absent),
        ("DoesNotExist", json!(null), None, true, ""),
        (
            "DoesNotExist",
            json!(null),
            Some("6"),
            false,
            "exists (value \"6\")",
        ),
        ("Gt", json!(["5"]), Some("6"), true, ""),
        (
            "Gt",
            json!("6"),
            Some("6"),
            false,
            "is \"6\", not greater than 6",
        ),
        ("Gt", json!(["5"]), None, false, absent),
        (
            "Gt",
            json!(["5"]),
            Some("6.1"),
            false,
            "is \"6.1\", not an integer",
        ),
        ("Gte", json!(["6"]), Some("6"), true, ""),
        (
            "Ge",
            json!(["6"]),
            Some("5"),
            false,
            "is \"5\", not at least 6",
        ),
        ("Lt", json!(["6"]), Some("5"), true, ""),
        ("Lt", json!(["6"]), Some("-7"), true, ""),
        (
            "Lt",
            json!(["6"]),
            Some("6"),
            false,
            "is \"6\", not less than 6",
        ),
        ("Lte", json!(["6"]), Some("6"), true, ""),
        (
            "Le",
            json!(["6"]),
            Some("7"),
            false,
            "is \"7\", not at most 6",
        ),
        ("Gt", json!([5]), Some("6"), true, ""),
    ]
}

#[test]
fn every_ocifit_operator_matches_labels_as_the_seed_does() {
    for (op, value, label, matches, reason) in cases() {
        let expression = if value.is_null() {
            json!({"key": KEY, "op": op})
        } else {
            json!({"key": KEY, "op": op, "value": value})
        };
        let artifact = ocifit_one(expression);
        let node = match label {
            Some(v) => node(&[(KEY, v)]),
            None => node(&[("other", "x")]),
        };
        let explanation = fit(&artifact, &node);
        let set = &explanation.sets[0];
        let case = format!("{op} {value} on {label:?}");
        assert_eq!(explanation.chosen.is_some(), matches, "{case}");
        if matches {
            assert_eq!(set.status, SetStatus::Matched, "{case}");
        } else {
            assert_eq!(set.status, SetStatus::NotMatched, "{case}");
            let got = set.reason.as_deref().unwrap_or_default();
            assert!(
                got.ends_with(reason),
                "{case}: reason {got:?} should end with {reason:?}"
            );
        }
    }
}

#[test]
fn not_in_on_missing_label_matches_in_ocifit_format() {
    let artifact = ocifit_one(json!({"key": "flavor", "op": "NotIn", "value": ["vanilla"]}));
    assert_eq!(fit(&artifact, &node(&[])).image(), Some("img:1"));
}

#[test]
fn label_reason_quotes_key_and_values_as_documented() {
    let artifact = ocifit_one(
        json!({"key": "feature.node.ocifit-k8s.flavor", "op": "In", "value": ["vanilla"]}),
    );
    let explanation = fit(
        &artifact,
        &node(&[("feature.node.ocifit-k8s.flavor", "chocolate")]),
    );
    assert_eq!(
        explanation.sets[0].reason.as_deref(),
        Some("label \"feature.node.ocifit-k8s.flavor\" is \"chocolate\", not in [vanilla]")
    );
}

#[test]
fn every_expression_of_every_term_and_rule_must_hold() {
    let artifact = super::parse(
        crate::engine::Format::Ocifit,
        &json!({"compatibilities": [{"tag": "img:1", "rules": [
            {"matchFeatures": [
                {"matchExpressions": [{"key": "a", "op": "Exists"}, {"key": "b", "op": "Exists"}]},
                {"matchExpressions": [{"key": "c", "op": "Exists"}]}]},
            {"matchFeatures": [{"matchExpressions": [{"key": "d", "op": "In", "value": "1"}]}]}]}]}),
    );
    let all = [("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")];
    assert_eq!(fit(&artifact, &node(&all)).image(), Some("img:1"));
    for missing in ["a", "b", "c", "d"] {
        let some: Vec<_> = all.iter().copied().filter(|(k, _)| *k != missing).collect();
        let explanation = fit(&artifact, &node(&some));
        assert_eq!(explanation.chosen, None, "without {missing}");
        let failure = explanation.sets[0]
            .failure
            .clone()
            .expect("a failure location");
        assert_eq!(failure.key.as_deref(), Some(missing));
    }
    let failure = fit(&artifact, &node(&[("a", "1"), ("b", "1"), ("c", "1")])).sets[0]
        .failure
        .clone()
        .expect("a failure location");
    assert_eq!(
        (failure.rule, failure.term, failure.expression),
        (Some(1), Some(0), Some(0))
    );
}
