//! Best fit (weights, ties, empty rules, platform filter), candidates mode, and the
//! explanation's JSON shape and summary.

use serde_json::json;

use super::{featured, fit, node, parse};
use crate::engine::{Candidate, Format, SetStatus, any_platform, best_candidate};

fn weighted(sets: &[(&str, i32, &str)]) -> crate::engine::Artifact {
    let sets: Vec<_> = sets
        .iter()
        .map(|(tag, weight, needs)| {
            let rules = if needs.is_empty() {
                json!([])
            } else {
                json!([{"matchFeatures": [{"matchExpressions": [{"key": needs, "op": "Exists"}]}]}])
            };
            json!({"tag": tag, "weight": weight, "description": format!("{tag} build"), "rules": rules})
        })
        .collect();
    parse(Format::Ocifit, &json!({"compatibilities": sets}))
}

#[test]
fn highest_weight_among_matching_sets_wins() {
    let artifact = weighted(&[("a", 1, "x"), ("b", 5, "x"), ("c", 9, "y"), ("d", 3, "x")]);
    let explanation = fit(&artifact, &node(&[("x", "")]));
    let chosen = explanation.chosen.clone().expect("a match");
    assert_eq!(
        (chosen.index, chosen.tag.as_str(), chosen.weight),
        (1, "b", 5)
    );
    assert_eq!(chosen.description.as_deref(), Some("b build"));
    let statuses: Vec<_> = explanation.sets.iter().map(|s| s.status).collect();
    assert_eq!(
        statuses,
        [
            SetStatus::Matched,
            SetStatus::Matched,
            SetStatus::NotMatched,
            SetStatus::Matched
        ]
    );
}

#[test]
fn ties_go_to_the_first_listed_set() {
    let artifact = weighted(&[("a", 2, "y"), ("b", 2, "x"), ("c", 2, "x")]);
    assert_eq!(fit(&artifact, &node(&[("x", "")])).image(), Some("b"));
}

#[test]
fn negative_weights_still_win_when_they_are_the_only_match() {
    let artifact = weighted(&[("a", -5, "x"), ("b", -2, "y")]);
    assert_eq!(fit(&artifact, &node(&[("x", "")])).image(), Some("a"));
}

#[test]
fn set_with_no_rules_matches_every_node() {
    let artifact = weighted(&[("special", 10, "gpu"), ("fallback", 0, "")]);
    assert_eq!(fit(&artifact, &node(&[])).image(), Some("fallback"));
    assert_eq!(
        fit(&artifact, &node(&[("gpu", "1")])).image(),
        Some("special")
    );
    let no_rules_key = parse(
        Format::Ocifit,
        &json!({"compatibilities": [{"tag": "any"}]}),
    );
    assert_eq!(fit(&no_rules_key, &node(&[])).image(), Some("any"));
}

#[test]
fn artifact_with_no_sets_chooses_nothing() {
    let artifact = parse(Format::Ocifit, &json!({"compatibilities": []}));
    let explanation = fit(&artifact, &node(&[]));
    assert_eq!(explanation.chosen, None);
    assert_eq!(
        explanation.summary(),
        "no compatible image: the artifact lists no set"
    );
}

#[test]
fn platform_filter_skips_a_matching_set_and_says_why() {
    let artifact = weighted(&[("img:arm-only", 10, ""), ("img:multi", 1, "")]);
    let mut asked = Vec::new();
    let explanation = artifact.best_fit(&node(&[]), |image: &str| {
        asked.push(image.to_owned());
        if image == "img:arm-only" {
            Err("image has no linux/amd64 variant".to_owned())
        } else {
            Ok(())
        }
    });
    assert_eq!(asked, ["img:arm-only", "img:multi"]);
    assert_eq!(explanation.image(), Some("img:multi"));
    assert_eq!(explanation.sets[0].status, SetStatus::Skipped);
    assert_eq!(
        explanation.sets[0].reason.as_deref(),
        Some("image has no linux/amd64 variant")
    );
}

#[test]
fn platform_filter_is_not_asked_about_sets_whose_rules_fail() {
    let artifact = weighted(&[("a", 1, "x")]);
    let explanation = artifact.best_fit(&node(&[]), |image: &str| -> Result<(), String> {
        panic!("asked about {image}")
    });
    assert_eq!(explanation.sets[0].status, SetStatus::NotMatched);
}

#[test]
fn explanation_serializes_with_stable_camel_case_fields() {
    let artifact = weighted(&[("debian:11", 0, "flavor"), ("busybox", 0, "")]);
    let explanation = artifact.best_fit(&node(&[]), |image: &str| {
        if image == "busybox" {
            Err("no arm64 variant".to_owned())
        } else {
            Ok(())
        }
    });
    let value = serde_json::to_value(&explanation).expect("serializable");
    assert_eq!(
        value,
        json!({
            "mode": "sets",
            "chosen": null,
            "sets": [
                {"index": 0, "tag": "debian:11", "weight": 0, "status": "notMatched",
                 "reason": "label \"flavor\" is absent",
                 "failure": {"set": 0, "tag": "debian:11", "rule": 0, "term": 0, "expression": 0,
                             "key": "flavor", "op": "Exists"}},
                {"index": 1, "tag": "busybox", "weight": 0, "status": "skipped",
                 "reason": "no arm64 variant"}
            ]
        })
    );
    let back: crate::engine::Explanation = serde_json::from_value(value).expect("deserializable");
    assert_eq!(back, explanation);
}

#[test]
fn summary_is_one_line_with_the_choice_or_the_reasons() {
    let artifact = weighted(&[("a", 0, "x"), ("b", 0, "y"), ("c", 0, "z"), ("d", 0, "w")]);
    assert_eq!(
        fit(&artifact, &node(&[("y", "")])).summary(),
        "b (set 1, weight 0)"
    );
    assert_eq!(
        fit(&artifact, &node(&[])).summary(),
        "no compatible image: set 0 (\"a\"): label \"x\" is absent; set 1 (\"b\"): label \"y\" is absent; \
         set 2 (\"c\"): label \"z\" is absent; and 1 more"
    );
}

fn nfd_artifact(sets: serde_json::Value) -> crate::engine::Artifact {
    parse(
        Format::Nfd,
        &json!({"version": "v1alpha1", "compatibilities": sets}),
    )
}

#[test]
fn candidate_fits_when_any_of_its_sets_matches_and_highest_weight_wins() {
    let avx512 = nfd_artifact(json!([
        {"tag": "server", "weight": 1, "rules": [{"matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX512F": {"op": "Exists"}}}]}]},
        {"tag": "desktop", "weight": 5, "rules": [{"matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX512BW": {"op": "Exists"}}}]}]}]));
    let avx2 = nfd_artifact(json!([
        {"rules": [{"matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX2": {"op": "Exists"}}}]}]}]));
    let generic = nfd_artifact(json!([{"description": "anything", "rules": []}]));
    let candidates = [
        Candidate {
            image: "app:avx2",
            weight: 10,
            artifact: &avx2,
        },
        Candidate {
            image: "app:avx512",
            weight: 20,
            artifact: &avx512,
        },
        Candidate {
            image: "app:generic",
            weight: 0,
            artifact: &generic,
        },
        Candidate {
            image: "app:also-avx512",
            weight: 20,
            artifact: &avx512,
        },
    ];
    let cpu = |flags: &[&str]| {
        let elements: serde_json::Map<_, _> =
            flags.iter().map(|f| (f.to_string(), json!({}))).collect();
        featured(json!({"flags": {"cpu.cpuid": {"elements": elements}}}))
    };

    let explanation = best_candidate(
        &candidates,
        &cpu(&["AVX2", "AVX512F", "AVX512BW"]),
        any_platform,
    );
    let chosen = explanation.chosen.clone().expect("a fit");
    assert_eq!(
        (chosen.index, chosen.tag.as_str(), chosen.weight),
        (1, "app:avx512", 20)
    );
    let set = chosen.set.expect("the candidate's set");
    assert_eq!((set.index, set.tag.as_str()), (1, "desktop"));
    assert_eq!(explanation.sets[1].sets.len(), 2);

    let only_avx2 = best_candidate(&candidates, &cpu(&["AVX2"]), any_platform);
    assert_eq!(only_avx2.image(), Some("app:avx2"));
    let missed = &only_avx2.sets[1];
    assert_eq!(missed.status, SetStatus::NotMatched);
    assert_eq!(
        missed.reason.as_deref(),
        Some("none of its 2 compatibility sets matched")
    );
    assert_eq!(
        missed.sets[0].reason.as_deref(),
        Some("element \"AVX512F\" of feature \"cpu.cpuid\" is absent")
    );

    assert_eq!(
        best_candidate(&candidates, &cpu(&[]), any_platform).image(),
        Some("app:generic")
    );
}

#[test]
fn candidates_mode_applies_the_platform_filter_to_fitting_candidates() {
    let any = nfd_artifact(json!([{"rules": []}]));
    let candidates = [
        Candidate {
            image: "app:arm64",
            weight: 9,
            artifact: &any,
        },
        Candidate {
            image: "app:amd64",
            weight: 1,
            artifact: &any,
        },
    ];
    let explanation = best_candidate(&candidates, &node(&[]), |image: &str| {
        if image.ends_with("arm64") {
            Err("no linux/amd64 variant".to_owned())
        } else {
            Ok(())
        }
    });
    assert_eq!(explanation.image(), Some("app:amd64"));
    assert_eq!(explanation.sets[0].status, SetStatus::Skipped);
    assert_eq!(
        explanation.summary(),
        "app:amd64 (candidate 1, weight 1, its set 0 (\"\"))"
    );
    let none = nfd_artifact(json!([]));
    let empty = best_candidate(
        &[Candidate {
            image: "x",
            weight: 0,
            artifact: &none,
        }],
        &node(&[]),
        any_platform,
    );
    assert_eq!(
        empty.summary(),
        "no compatible image: candidate 0 (\"x\"): its artifact lists no compatibility set"
    );
}
