//! Property: grouping nodes into classes never changes any node's answer. Random nodes (labels,
//! NodeFeature features or label-projected ones, over a small alphabet) and random artifacts
//! (both formats, a small set of operators; one artifact or several candidates) are evaluated
//! once per class and once per node, with a platform filter that depends on the arch; the whole
//! explanation must be equal. A class's label selector picks exactly its nodes.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::classes::grouping::{ARCH_LABEL, group};
use crate::engine::{
    Artifact, Candidate, Explanation, Features, Format, NodeInputs, Reads, best_candidate,
};

const KEYS: [&str; 4] = ["a", "b", "c", ARCH_LABEL];
const VALUES: [&str; 5] = ["1", "5", "x", "true", ""];
const FEATURES: [&str; 3] = ["cpu.cpuid", "kernel.version", "pci.device"];
const ELEMENTS: [&str; 3] = ["e1", "e2", "e3"];

fn value() -> impl Strategy<Value = String> {
    prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned)
}

fn element() -> impl Strategy<Value = String> {
    prop::sample::select(ELEMENTS.to_vec()).prop_map(str::to_owned)
}

fn attributes() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(element(), value(), 0..3)
}

fn features() -> impl Strategy<Value = Features> {
    let feature = || prop::sample::select(FEATURES.to_vec()).prop_map(str::to_owned);
    (
        prop::collection::btree_map(
            feature(),
            prop::collection::btree_set(element(), 0..3),
            0..2,
        ),
        prop::collection::btree_map(feature(), attributes(), 0..2),
        prop::collection::btree_map(feature(), prop::collection::vec(attributes(), 0..3), 0..2),
    )
        .prop_map(|(flags, attributes, instances)| Features {
            flags,
            attributes,
            instances,
        })
}

/// Labels over a small alphabet, plus label-projectable NFD feature labels.
fn node_labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    let plain = prop::collection::btree_map(
        prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
        value(),
        0..4,
    );
    let projected = prop::collection::btree_map(
        (
            prop::sample::select(vec!["cpu-cpuid", "kernel-version"]),
            element(),
        )
            .prop_map(|(source, e)| format!("feature.node.kubernetes.io/{source}.{e}")),
        value(),
        0..3,
    );
    (plain, projected).prop_map(|(mut plain, projected)| {
        plain.extend(projected);
        plain
    })
}

fn node() -> impl Strategy<Value = NodeInputs> {
    (node_labels(), prop::option::of(features()))
        .prop_map(|(labels, features)| NodeInputs::new(labels).with_features(features))
}

fn ocifit_expression() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(KEYS.to_vec());
    let op = prop::sample::select(vec![
        "In",
        "NotIn",
        "InRegexp",
        "Exists",
        "DoesNotExist",
        "Gt",
        "Lte",
    ]);
    (key, op, value(), prop::sample::select(vec!["1", "5"])).prop_map(|(key, op, v, n)| match op {
        "Gt" | "Lte" => json!({"key": key, "op": op, "value": n}),
        "Exists" | "DoesNotExist" => json!({"key": key, "op": op}),
        "InRegexp" => json!({"key": key, "op": op, "value": ["^[0-9]"]}),
        _ => json!({"key": key, "op": op, "value": [v, "x"]}),
    })
}

fn nfd_expression() -> impl Strategy<Value = Value> {
    let op = prop::sample::select(vec![
        "In",
        "NotIn",
        "Exists",
        "DoesNotExist",
        "Gt",
        "GeLe",
        "IsTrue",
        "",
    ]);
    (op, value()).prop_map(|(op, v)| match op {
        "Gt" => json!({"op": op, "value": ["1"]}),
        "GeLe" => json!({"op": op, "value": ["1", "5"]}),
        "In" | "NotIn" => json!({"op": op, "value": [v]}),
        _ => json!({"op": op}),
    })
}

fn nfd_term() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(FEATURES.to_vec()),
        prop::option::of(prop::collection::btree_map(
            element(),
            nfd_expression(),
            0..3,
        )),
        prop::option::of(prop::sample::select(vec!["^e[12]", "e3"])),
    )
        .prop_map(|(feature, expressions, name)| {
            let mut term = json!({"feature": feature});
            if let Some(e) = expressions {
                term["matchExpressions"] = json!(e);
            }
            if let Some(pattern) = name {
                term["matchName"] = json!({"op": "InRegexp", "value": [pattern]});
            }
            term
        })
}

fn nfd_rule() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(nfd_term(), 0..3),
        prop::collection::vec(prop::collection::vec(nfd_term(), 1..3), 0..3),
    )
        .prop_map(|(terms, any)| {
            let any: Vec<Value> = any
                .into_iter()
                .map(|t| json!({"matchFeatures": t}))
                .collect();
            json!({"name": "r", "matchFeatures": terms, "matchAny": any})
        })
}

fn set(rules: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    (prop::collection::vec(rules, 0..3), 0..3i32, 0..3u8).prop_map(|(rules, weight, tag)| {
        json!({"tag": format!("img:{tag}"), "weight": weight, "rules": rules})
    })
}

fn ocifit_artifact() -> impl Strategy<Value = Artifact> {
    let rule = prop::collection::vec(prop::collection::vec(ocifit_expression(), 1..3), 1..3)
        .prop_map(|terms| {
            let terms: Vec<Value> = terms
                .into_iter()
                .map(|e| json!({"matchExpressions": e}))
                .collect();
            json!({"matchFeatures": terms})
        });
    prop::collection::vec(set(rule), 1..4).prop_map(|sets| parse(Format::Ocifit, sets))
}

fn nfd_artifact() -> impl Strategy<Value = Artifact> {
    prop::collection::vec(set(nfd_rule()), 0..4).prop_map(|sets| parse(Format::Nfd, sets))
}

fn parse(format: Format, sets: Vec<Value>) -> Artifact {
    let doc = json!({"version": "v1alpha1", "compatibilities": sets});
    match Artifact::parse(format, doc.to_string().as_bytes()) {
        Ok(artifact) => artifact,
        Err(e) => panic!("generated an invalid artifact: {e}\n{doc}"),
    }
}

/// A platform filter as the controller builds one per class: some images lack arm64.
fn platform(inputs: &NodeInputs) -> impl FnMut(&str) -> Result<(), String> + '_ {
    |image: &str| match inputs.labels.get(ARCH_LABEL).map(String::as_str) {
        Some("x") if image.ends_with(":1") => Err(format!("{image} has no x variant")),
        _ => Ok(()),
    }
}

/// Every node's own answer equals its class's answer, and every node is in exactly one class.
fn assert_classes_answer_for_every_node(
    reads: &Reads,
    nodes: &[NodeInputs],
    decide: impl Fn(&NodeInputs) -> Explanation,
) -> Result<(), TestCaseError> {
    let names: Vec<String> = (0..nodes.len()).map(|i| format!("node-{i:03}")).collect();
    let classes = group(reads, names.iter().map(String::as_str).zip(nodes));
    let mut seen = 0;
    for class in &classes {
        let answer = decide(&class.inputs);
        for name in &class.nodes {
            let index = names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| TestCaseError::fail(format!("unknown node {name}")))?;
            prop_assert_eq!(
                &decide(&nodes[index]),
                &answer,
                "node {} in class {}",
                name,
                class.name
            );
            seen += 1;
        }
    }
    prop_assert_eq!(seen, nodes.len());
    for class in &classes {
        let Some(selector) = &class.selector else {
            continue;
        };
        for (name, node) in names.iter().zip(nodes) {
            let picked = selector
                .iter()
                .all(|(k, v)| node.labels.get(k) == v.as_ref());
            prop_assert_eq!(
                picked,
                class.nodes.contains(name),
                "selector of {}",
                class.name
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn grouping_never_changes_an_answer_for_ocifit_artifacts(
        artifact in ocifit_artifact(),
        nodes in prop::collection::vec(node(), 1..24),
    ) {
        assert_classes_answer_for_every_node(&artifact.reads(), &nodes, |n| {
            artifact.best_fit(n, platform(n))
        })?;
    }

    #[test]
    fn grouping_never_changes_an_answer_for_nfd_artifacts(
        artifact in nfd_artifact(),
        nodes in prop::collection::vec(node(), 1..24),
    ) {
        assert_classes_answer_for_every_node(&artifact.reads(), &nodes, |n| {
            artifact.best_fit(n, platform(n))
        })?;
    }

    #[test]
    fn grouping_never_changes_an_answer_for_candidates(
        artifacts in prop::collection::vec(nfd_artifact(), 1..4),
        nodes in prop::collection::vec(node(), 1..24),
    ) {
        let candidates: Vec<Candidate<'_>> = artifacts
            .iter()
            .enumerate()
            .map(|(i, artifact)| Candidate {
                image: ["app:0", "app:1", "app:2"][i],
                weight: i32::try_from(i % 2).unwrap_or(0),
                artifact,
            })
            .collect();
        let mut reads = Reads::default();
        artifacts.iter().for_each(|a| reads.extend(&a.reads()));
        assert_classes_answer_for_every_node(&reads, &nodes, |n| {
            best_candidate(&candidates, n, platform(n))
        })?;
    }
}
