//! Every NFD operator and term form on NodeFeature features, including where NFD differs from
//! ocifit.

use serde_json::{Value, json};

use super::{featured, fit, nfd_terms, node};
use crate::engine::SetStatus;

/// An attribute feature `kernel.version` with element `major` (or none when `value` is None).
fn kernel(value: Option<&str>) -> Value {
    let elements = match value {
        Some(v) => json!({"major": v, "full": "6.8.0-45-generic"}),
        None => json!({"full": "6.8.0-45-generic"}),
    };
    json!({"attributes": {"kernel.version": {"elements": elements}}})
}

fn attr_term(expression: Value) -> Value {
    json!([{"feature": "kernel.version", "matchExpressions": {"major": expression}}])
}

/// (expression, the element's value or None for absent, matches, end of the reason)
fn attribute_cases() -> Vec<(Value, Option<&'static str>, bool, &'static str)> {
    let absent = "element \"major\" of feature \"kernel.version\" is absent";
    vec![
        (
            json!({"op": "In", "value": ["6", "7"]}),
            Some("6"),
            true,
            "",
        ),
        (
            json!({"op": "In", "value": ["7"]}),
            Some("6"),
            false,
            "is \"6\", not in [7]",
        ),
        (json!({"op": "In", "value": ["6"]}), None, false, absent),
        (json!({"op": "NotIn", "value": ["7"]}), Some("6"), true, ""),
        (
            json!({"op": "NotIn", "value": ["6"]}),
            Some("6"),
            false,
            "which is in [6]",
        ),
        (
            json!({"op": "NotIn", "value": ["7"]}),
            None,
            false,
            "is absent, and NFD's NotIn needs it present",
        ),
        (
            json!({"op": "InRegexp", "value": ["^[0-9]$"]}),
            Some("6"),
            true,
            "",
        ),
        (
            json!({"op": "InRegexp", "value": ["x", "^1"]}),
            Some("6"),
            false,
            "matching none of [x, ^1]",
        ),
        (json!({"op": "Exists"}), Some("6"), true, ""),
        (json!({"op": "Exists"}), None, false, absent),
        (json!({"op": "DoesNotExist"}), None, true, ""),
        (
            json!({"op": "DoesNotExist"}),
            Some("6"),
            false,
            "exists (value \"6\")",
        ),
        (json!({"op": "Gt", "value": ["5"]}), Some("6"), true, ""),
        (
            json!({"op": "Gt", "value": ["6"]}),
            Some("6"),
            false,
            "not greater than 6",
        ),
        (json!({"op": "Ge", "value": ["6"]}), Some("6"), true, ""),
        (
            json!({"op": "Gte", "value": ["7"]}),
            Some("6"),
            false,
            "not at least 7",
        ),
        (json!({"op": "Lt", "value": ["7"]}), Some("6"), true, ""),
        (
            json!({"op": "Lt", "value": ["6"]}),
            Some("6"),
            false,
            "not less than 6",
        ),
        (json!({"op": "Le", "value": ["6"]}), Some("6"), true, ""),
        (
            json!({"op": "Lte", "value": ["5"]}),
            Some("6"),
            false,
            "not at most 5",
        ),
        (
            json!({"op": "Gt", "value": ["5"]}),
            Some("six"),
            false,
            "is \"six\", not an integer (an evaluation error in NFD)",
        ),
        (json!({"op": "Gt", "value": ["5"]}), None, false, absent),
        (
            json!({"op": "GtLt", "value": ["5", "7"]}),
            Some("6"),
            true,
            "",
        ),
        (
            json!({"op": "GtLt", "value": ["6", "7"]}),
            Some("6"),
            false,
            "not strictly between 6 and 7",
        ),
        (
            json!({"op": "GeLe", "value": ["6", "7"]}),
            Some("6"),
            true,
            "",
        ),
        (
            json!({"op": "GeLe", "value": ["4", "5"]}),
            Some("6"),
            false,
            "not between 4 and 5 (inclusive)",
        ),
        (
            json!({"op": "Ge", "value": ["6.1"], "type": "version"}),
            Some("6.8.0-45-generic"),
            true,
            "",
        ),
        (
            json!({"op": "Ge", "value": ["6.10"], "type": "version"}),
            Some("6.8.0-45-generic"),
            false,
            "not at least 6.10",
        ),
        (
            json!({"op": "Gt", "value": ["6"], "type": "version"}),
            Some("6.0.1"),
            true,
            "",
        ),
        (
            json!({"op": "Lt", "value": ["v5.4"], "type": "version"}),
            Some("4.18.0-513.el8.x86_64"),
            true,
            "",
        ),
        (
            json!({"op": "Gt", "value": ["6"], "type": "version"}),
            Some("6"),
            false,
            "not greater than 6",
        ),
        (
            json!({"op": "Gt", "value": ["6"], "type": "version"}),
            Some("six"),
            false,
            "not a version (an evaluation error in NFD)",
        ),
        (
            json!({"op": "GtLt", "value": ["6.1", "6.9"], "type": "version"}),
            Some("6.8.1"),
            true,
            "",
        ),
        (
            json!({"op": "GeLe", "value": ["6.9", "7"], "type": "version"}),
            Some("6.8.1"),
            false,
            "not between 6.9 and 7 (inclusive)",
        ),
        (json!({"op": "IsTrue"}), Some("true"), true, ""),
        (
            json!({"op": "IsTrue"}),
            Some("True"),
            false,
            "is \"True\", not \"true\"",
        ),
        (json!({"op": "IsFalse"}), Some("false"), true, ""),
        (
            json!({"op": "IsFalse"}),
            Some("true"),
            false,
            "not \"false\"",
        ),
        (json!({"op": ""}), None, true, ""),
        (json!({}), Some("6"), true, ""),
        (json!({"op": "In", "value": [6]}), Some("6"), true, ""),
    ]
}

#[test]
fn every_nfd_operator_matches_attribute_elements_as_nfd_does() {
    for (expression, value, matches, reason) in attribute_cases() {
        let artifact = nfd_terms(attr_term(expression.clone()));
        let explanation = fit(&artifact, &featured(kernel(value)));
        let set = &explanation.sets[0];
        let case = format!("{expression} on {value:?}");
        assert_eq!(explanation.chosen.is_some(), matches, "{case}: {set:?}");
        if !matches {
            let got = set.reason.as_deref().unwrap_or_default();
            assert!(
                got.ends_with(reason),
                "{case}: reason {got:?} should end with {reason:?}"
            );
            let failure = set.failure.clone().expect("a failure location");
            assert_eq!(failure.key.as_deref(), Some("major"), "{case}");
            assert_eq!(failure.feature.as_deref(), Some("kernel.version"), "{case}");
        }
    }
}

#[test]
fn not_in_on_missing_element_does_not_match_in_nfd_format() {
    let artifact = nfd_terms(attr_term(json!({"op": "NotIn", "value": ["5"]})));
    assert_eq!(fit(&artifact, &featured(kernel(None))).chosen, None);
}

fn cpuid(flags: &[&str]) -> Value {
    json!({"flags": {"cpu.cpuid": {"elements": flags.iter().map(|f| (f.to_string(), json!({}))).collect::<serde_json::Map<_, _>>()}}})
}

#[test]
fn flag_elements_answer_presence_only() {
    let cases = [
        (json!({"op": "Exists"}), true, ""),
        (
            json!({"op": "DoesNotExist"}),
            false,
            "element \"AVX2\" of feature \"cpu.cpuid\" exists",
        ),
        (
            json!({"op": "In", "value": ["true"]}),
            false,
            "is a flag with no value, so op In cannot hold",
        ),
        (
            json!({"op": "IsTrue"}),
            false,
            "is a flag with no value, so op IsTrue cannot hold",
        ),
        (json!({"op": ""}), true, ""),
    ];
    for (expression, matches, reason) in cases {
        let artifact =
            nfd_terms(json!([{"feature": "cpu.cpuid", "matchExpressions": {"AVX2": expression}}]));
        let explanation = fit(&artifact, &featured(cpuid(&["AVX", "AVX2"])));
        assert_eq!(explanation.chosen.is_some(), matches, "{expression}");
        if !matches {
            let got = explanation.sets[0].reason.clone().unwrap_or_default();
            assert!(got.ends_with(reason), "{expression}: {got}");
        }
    }
    let missing = nfd_terms(
        json!([{"feature": "cpu.cpuid", "matchExpressions": {"AVX512F": {"op": "DoesNotExist"}}}]),
    );
    assert!(fit(&missing, &featured(cpuid(&["AVX2"]))).chosen.is_some());
}

#[test]
fn term_on_missing_feature_does_not_match() {
    let artifact = nfd_terms(json!([{"feature": "pci.device"}]));
    let explanation = fit(&artifact, &featured(cpuid(&["AVX2"])));
    assert_eq!(explanation.chosen, None);
    assert_eq!(
        explanation.sets[0].reason.as_deref(),
        Some("feature \"pci.device\" is not present on the node")
    );
    let doesnt = nfd_terms(
        json!([{"feature": "pci.device", "matchExpressions": {"vendor": {"op": "DoesNotExist"}}}]),
    );
    assert_eq!(
        fit(&doesnt, &featured(cpuid(&[]))).chosen,
        None,
        "even DoesNotExist needs the feature"
    );
    let present = nfd_terms(json!([{"feature": "cpu.cpuid"}]));
    assert!(
        fit(&present, &featured(cpuid(&[]))).chosen.is_some(),
        "a bare term checks presence"
    );
}

#[test]
fn feature_names_are_matched_case_insensitively_as_nfd_lowercases_them() {
    let artifact = nfd_terms(
        json!([{"feature": "CPU.CPUID", "matchExpressions": {"AVX2": {"op": "Exists"}}}]),
    );
    assert!(fit(&artifact, &featured(cpuid(&["AVX2"]))).chosen.is_some());
}

fn pci(devices: &[(&str, &str)]) -> Value {
    let elements: Vec<Value> = devices
        .iter()
        .map(|(vendor, class)| json!({"attributes": {"vendor": vendor, "class": class}}))
        .collect();
    json!({"instances": {"pci.device": {"elements": elements}}})
}

#[test]
fn instance_feature_matches_when_one_instance_satisfies_every_expression() {
    let artifact = nfd_terms(json!([{"feature": "pci.device", "matchExpressions": {
        "vendor": {"op": "In", "value": ["10de"]}, "class": {"op": "In", "value": ["0302"]}}}]));
    let yes = featured(pci(&[("8086", "0200"), ("10de", "0302")]));
    assert!(fit(&artifact, &yes).chosen.is_some());
    // The vendor and the class hold, but on different instances.
    let split = featured(pci(&[("10de", "0200"), ("8086", "0302")]));
    let explanation = fit(&artifact, &split);
    assert_eq!(explanation.chosen, None);
    assert_eq!(
        explanation.sets[0].reason.as_deref(),
        Some("feature \"pci.device\" has no instance with class In [0302] and vendor In [10de]")
    );
    let none = featured(pci(&[]));
    assert_eq!(fit(&artifact, &none).chosen, None);
    let any = nfd_terms(json!([{"feature": "pci.device", "matchExpressions": {}}]));
    assert!(
        fit(&any, &featured(pci(&[("1", "2")]))).chosen.is_some(),
        "empty map: any instance"
    );
    assert_eq!(
        fit(&any, &none).chosen,
        None,
        "empty map: needs one instance"
    );
}

#[test]
fn instance_evaluation_error_is_a_non_match_whatever_the_instance_order() {
    let artifact = nfd_terms(json!([{"feature": "pci.device", "matchExpressions": {
        "vendor": {"op": "Gt", "value": ["5"]}}}]));
    let a = fit(
        &artifact,
        &featured(pci(&[("zz", "1"), ("10", "1"), ("aa", "1")])),
    );
    let b = fit(
        &artifact,
        &featured(pci(&[("aa", "1"), ("10", "1"), ("zz", "1")])),
    );
    assert_eq!(a, b);
    assert_eq!(a.chosen, None, "NFD stops with an error: no match");
    assert_eq!(
        a.sets[0].reason.as_deref(),
        Some(
            "element \"vendor\" of an instance of feature \"pci.device\" is \"aa\", not an integer (an evaluation error in NFD)"
        )
    );
}

#[test]
fn match_name_reads_element_names_and_ands_with_match_expressions() {
    let avx512 = nfd_terms(
        json!([{"feature": "cpu.cpuid", "matchName": {"op": "InRegexp", "value": ["^AVX512"]}}]),
    );
    assert!(
        fit(&avx512, &featured(cpuid(&["AVX2", "AVX512F"])))
            .chosen
            .is_some()
    );
    let explanation = fit(&avx512, &featured(cpuid(&["AVX", "AVX2"])));
    assert_eq!(
        explanation.sets[0].reason.as_deref(),
        Some("feature \"cpu.cpuid\" has no element matching ^AVX512")
    );
    let failure = explanation.sets[0]
        .failure
        .clone()
        .expect("a failure location");
    assert!(failure.match_name);
    assert_eq!(failure.op.as_deref(), Some("InRegexp"));

    let both = nfd_terms(json!([{"feature": "cpu.cpuid",
        "matchExpressions": {"AVX2": {"op": "Exists"}},
        "matchName": {"op": "In", "value": ["AVX512F", "AVX512BW"]}}]));
    assert!(
        fit(&both, &featured(cpuid(&["AVX2", "AVX512BW"])))
            .chosen
            .is_some()
    );
    assert_eq!(
        fit(&both, &featured(cpuid(&["AVX2"]))).sets[0]
            .reason
            .as_deref(),
        Some("feature \"cpu.cpuid\" has no element named AVX512F or AVX512BW")
    );
    assert_eq!(fit(&both, &featured(cpuid(&["AVX512BW"]))).chosen, None);

    // Names of attributes and of instance attributes count too.
    let names = nfd_terms(
        json!([{"feature": "pci.device", "matchName": {"op": "In", "value": ["vendor"]}}]),
    );
    assert!(
        fit(&names, &featured(pci(&[("10de", "0302")])))
            .chosen
            .is_some()
    );
}

#[test]
fn match_any_needs_one_element_and_is_anded_with_match_features() {
    let artifact = super::parse(
        crate::engine::Format::Nfd,
        &json!({"compatibilities": [{"tag": "img:1", "rules": [{"name": "nics",
            "matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX2": {"op": "Exists"}}}],
            "matchAny": [
                {"matchFeatures": [{"feature": "pci.device", "matchExpressions": {"vendor": {"op": "In", "value": ["0eee"]}}}]},
                {"matchFeatures": [{"feature": "pci.device", "matchExpressions": {"vendor": {"op": "In", "value": ["0fff"]}}}]}]}]}]}),
    );
    let with = |flags: &[&str], vendor: &str| {
        let mut features = cpuid(flags);
        features["instances"] = pci(&[(vendor, "0200")])["instances"].clone();
        featured(features)
    };
    assert!(fit(&artifact, &with(&["AVX2"], "0eee")).chosen.is_some());
    assert!(fit(&artifact, &with(&["AVX2"], "0fff")).chosen.is_some());
    let neither = fit(&artifact, &with(&["AVX2"], "8086"));
    assert_eq!(neither.chosen, None);
    let set = &neither.sets[0];
    assert_eq!(
        set.reason.as_deref(),
        Some(
            "none of the 2 matchAny elements matched; matchAny 0: feature \"pci.device\" has no instance with vendor In [0eee]"
        )
    );
    let failure = set.failure.clone().expect("a failure location");
    assert_eq!(
        (failure.match_any, failure.rule_name.as_deref()),
        (Some(0), Some("nics"))
    );
    let no_avx2 = fit(&artifact, &with(&["AVX"], "0eee"));
    assert_eq!(no_avx2.sets[0].status, SetStatus::NotMatched);
    assert_eq!(
        no_avx2.sets[0].failure.clone().and_then(|f| f.match_any),
        None
    );
}

#[test]
fn flags_and_attributes_of_one_feature_are_checked_together() {
    let both = json!({
        "flags": {"cpu.cpuid": {"elements": {"AVX2": {}}}},
        "attributes": {"cpu.cpuid": {"elements": {"AVX10_VERSION": "1"}}}});
    let holds = nfd_terms(json!([{"feature": "cpu.cpuid", "matchExpressions": {
        "AVX2": {"op": "Exists"}, "AVX10_VERSION": {"op": "Ge", "value": ["1"]}}}]));
    assert!(fit(&holds, &featured(both.clone())).chosen.is_some());
    let absent_in_both = nfd_terms(
        json!([{"feature": "cpu.cpuid", "matchExpressions": {"AVX2": {"op": "DoesNotExist"}}}]),
    );
    assert_eq!(
        fit(&absent_in_both, &featured(both)).chosen,
        None,
        "DoesNotExist must hold on flags and attributes"
    );
}

#[test]
fn nfd_rules_read_features_projected_from_labels_without_node_feature_objects() {
    let artifact = nfd_terms(json!([
        {"feature": "cpu.cpuid", "matchExpressions": {"AVX2": {"op": "Exists"}}},
        {"feature": "kernel.version", "matchExpressions": {"major": {"op": "Ge", "value": ["6"]}}}]));
    let labelled = node(&[
        ("feature.node.kubernetes.io/cpu-cpuid.AVX2", "true"),
        ("feature.node.kubernetes.io/kernel-version.major", "6"),
    ]);
    assert!(fit(&artifact, &labelled).chosen.is_some());
    let pci = nfd_terms(json!([{"feature": "pci.device"}]));
    let with_pci_label = node(&[("feature.node.kubernetes.io/pci-0300_10de.present", "true")]);
    assert_eq!(
        fit(&pci, &with_pci_label).chosen,
        None,
        "instance features cannot be projected"
    );
}

#[test]
fn versions_read_one_to_three_numbers_and_ignore_any_suffix() {
    use crate::engine::op::parse_version;
    let v = |s: &str| parse_version(s);
    assert_eq!(v("6"), v("6.0.0"));
    assert_eq!(v("v6.8"), v("6.8.0"));
    assert_eq!(v("6.8.0-45-generic"), v("6.8.0"));
    assert_eq!(v("4.18.0-513.el8.x86_64"), v("4.18.0"));
    assert_eq!(v("1.2.3+build.7"), v("1.2.3"));
    assert!(v("6.10") > v("6.9"));
    for bad in [
        "", "v", "six", "6.", ".6", "6..1", "1.2.3.4", "6-", "6.x", "-1",
    ] {
        assert_eq!(v(bad), None, "{bad:?}");
    }
}
