//! Grouping nodes into classes: what distinguishes a class, stable names, readable labels,
//! control-plane exclusion, and (property) that a class's answer is every member's answer.

mod property;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{NodeClass, group, is_control_plane, node_counts, node_selector_matches};
use crate::engine::{Artifact, Features, Format, NodeInputs};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn worker(host: &str, arch: &str, extra: &[(&str, &str)]) -> (String, NodeInputs) {
    let mut l = labels(&[
        ("kubernetes.io/hostname", host),
        ("kubernetes.io/arch", arch),
        ("kubernetes.io/os", "linux"),
    ]);
    l.extend(labels(extra));
    (host.to_owned(), NodeInputs::new(l))
}

fn classes_of(artifact: &Artifact, nodes: &[(String, NodeInputs)]) -> Vec<NodeClass> {
    group(
        &artifact.reads(),
        nodes.iter().map(|(n, i)| (n.as_str(), i)),
    )
}

fn flavor() -> Artifact {
    Artifact::parse(
        Format::Ocifit,
        include_bytes!("../../../../example/flavor-compat.json"),
    )
    .expect("the flavor example parses")
}

const FLAVOR: &str = "feature.node.ocifit-k8s.flavor";

#[test]
fn nodes_differing_only_in_labels_the_rules_do_not_read_share_a_class() {
    let nodes = [
        worker("w1", "amd64", &[(FLAVOR, "vanilla"), ("zone", "a")]),
        worker("w2", "amd64", &[(FLAVOR, "vanilla"), ("zone", "b")]),
        worker("w3", "amd64", &[(FLAVOR, "chocolate")]),
        worker("w4", "arm64", &[(FLAVOR, "vanilla")]),
        worker("w5", "amd64", &[]),
    ];
    let classes = classes_of(&flavor(), &nodes);
    let mut members: Vec<Vec<&str>> = classes
        .iter()
        .map(|c| c.nodes.iter().map(String::as_str).collect())
        .collect();
    members.sort();
    assert_eq!(
        members,
        [vec!["w1", "w2"], vec!["w3"], vec!["w4"], vec!["w5"]]
    );
    let vanilla = classes
        .iter()
        .find(|c| c.nodes == ["w1", "w2"])
        .expect("the vanilla class");
    assert_eq!(
        vanilla.labels,
        labels(&[
            (FLAVOR, "vanilla"),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux")
        ])
    );
    assert_eq!(
        vanilla.inputs, nodes[0].1,
        "the representative is the first node by name"
    );
    let unlabelled = classes
        .iter()
        .find(|c| c.nodes == ["w5"])
        .expect("the unlabelled class");
    assert!(
        !unlabelled.labels.contains_key(FLAVOR),
        "an absent label is left out"
    );
}

#[test]
fn class_names_are_stable_across_node_order_and_sorted() {
    let mut nodes: Vec<_> = (0..12)
        .map(|i| {
            let flavor = ["vanilla", "chocolate", "strawberry"][i % 3];
            let arch = ["amd64", "arm64"][i % 2];
            worker(&format!("node-{i:02}"), arch, &[(FLAVOR, flavor)])
        })
        .collect();
    let first = classes_of(&flavor(), &nodes);
    assert_eq!(first.len(), 6);
    nodes.reverse();
    nodes.swap(2, 7);
    let second = classes_of(&flavor(), &nodes);
    assert_eq!(first, second);
    let names: Vec<&str> = first.iter().map(|c| c.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    for name in names {
        assert!(name.starts_with("c-") && name.len() == 12, "{name}");
        assert!(name[2..].chars().all(|c| c.is_ascii_hexdigit()), "{name}");
    }
}

/// A golden name: the hash of `{flavor: vanilla, arch: amd64, os: linux}` (checked by hand with
/// Python's hashlib over the documented encoding). Changing the encoding renames every class in
/// every cluster's status, so it must be deliberate.
#[test]
fn class_name_is_the_same_in_every_process() {
    let classes = classes_of(
        &flavor(),
        &[worker("any-name", "amd64", &[(FLAVOR, "vanilla")])],
    );
    assert_eq!(classes[0].name, "c-fef3a20981");
}

#[test]
fn nodes_without_arch_or_os_are_grouped_apart_from_those_with() {
    let bare = (
        "bare".to_owned(),
        NodeInputs::new(labels(&[(FLAVOR, "vanilla")])),
    );
    let full = worker("full", "amd64", &[(FLAVOR, "vanilla")]);
    assert_eq!(classes_of(&flavor(), &[bare, full]).len(), 2);
}

fn nfd_artifact(doc: Value) -> Artifact {
    Artifact::parse(Format::Nfd, doc.to_string().as_bytes()).expect("valid")
}

fn with_features(host: &str, features: Value) -> (String, NodeInputs) {
    let (name, inputs) = worker(host, "amd64", &[]);
    let features: Features = serde_json::from_value(features).expect("NFD's shape");
    (name, inputs.with_features(Some(features)))
}

#[test]
fn nfd_classes_distinguish_exactly_the_features_and_elements_read() {
    let artifact = nfd_artifact(
        json!({"compatibilities": [{"tag": "t", "rules": [{"matchFeatures": [
        {"feature": "kernel.version", "matchExpressions": {"major": {"op": "Ge", "value": ["6"]}}},
        {"feature": "cpu.cpuid", "matchName": {"op": "InRegexp", "value": ["^AVX512"]}},
        {"feature": "pci.device", "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}}}]}]}]}),
    );
    let features = |major: &str, minor: &str, flags: &[&str], devices: &[(&str, &str)]| {
        let flags: serde_json::Map<_, _> =
            flags.iter().map(|f| (f.to_string(), json!({}))).collect();
        let devices: Vec<_> = devices
            .iter()
            .map(|(v, d)| json!({"attributes": {"vendor": v, "device": d}}))
            .collect();
        json!({
            "flags": {"cpu.cpuid": {"elements": flags}},
            "attributes": {"kernel.version": {"elements": {"major": major, "minor": minor}}},
            "instances": {"pci.device": {"elements": devices}}})
    };
    let nodes = [
        // Same reads: minor and device ids are not read; instance order and duplicates do not count.
        with_features(
            "a",
            features("6", "1", &["AVX2"], &[("10de", "1"), ("8086", "2")]),
        ),
        with_features(
            "b",
            features(
                "6",
                "8",
                &["AVX2"],
                &[("8086", "3"), ("10de", "4"), ("10de", "5")],
            ),
        ),
        // A different kernel major.
        with_features(
            "c",
            features("5", "1", &["AVX2"], &[("10de", "1"), ("8086", "2")]),
        ),
        // A different set of cpuid names (read by matchName).
        with_features(
            "d",
            features("6", "1", &["AVX2", "SSE4"], &[("10de", "1"), ("8086", "2")]),
        ),
    ];
    let classes = classes_of(&artifact, &nodes);
    let mut members: Vec<Vec<&str>> = classes
        .iter()
        .map(|c| c.nodes.iter().map(String::as_str).collect())
        .collect();
    members.sort();
    assert_eq!(members, [vec!["a", "b"], vec!["c"], vec!["d"]]);
    let ab = classes
        .iter()
        .find(|c| c.nodes == ["a", "b"])
        .expect("class of a and b");
    assert_eq!(
        ab.labels,
        labels(&[
            ("cpu.cpuid", "flags"),
            ("cpu.cpuid.names", "AVX2"),
            ("kernel.version", "attributes"),
            ("kernel.version.attributes/major", "6"),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
            ("pci.device", "instances"),
            ("pci.device.instances", "vendor=10de; vendor=8086"),
        ])
    );
}

#[test]
fn nfd_classes_show_flag_elements_and_missing_features() {
    let artifact = nfd_artifact(
        json!({"compatibilities": [{"tag": "t", "rules": [{"matchFeatures": [
        {"feature": "cpu.cpuid", "matchExpressions": {"AVX2": {"op": "Exists"}, "AVX512F": {"op": "Exists"}}},
        {"feature": "memory.nv"}]}]}]}),
    );
    let nodes = [
        with_features(
            "a",
            json!({"flags": {"cpu.cpuid": {"elements": {"AVX2": {}}}}}),
        ),
        worker(
            "b",
            "amd64",
            &[("feature.node.kubernetes.io/cpu-cpuid.AVX2", "true")],
        ),
    ];
    let classes = classes_of(&artifact, &nodes);
    assert_eq!(
        classes.len(),
        1,
        "NodeFeature and label projection giving equal reads: one class"
    );
    assert_eq!(
        classes[0]
            .labels
            .get("cpu.cpuid.flags/AVX2")
            .map(String::as_str),
        Some("true")
    );
    assert!(!classes[0].labels.contains_key("cpu.cpuid.flags/AVX512F"));
    assert!(!classes[0].labels.contains_key("memory.nv"));
}

#[test]
fn control_plane_nodes_are_left_out_unless_the_selector_picks_them() {
    let cp = labels(&[
        ("node-role.kubernetes.io/control-plane", ""),
        ("tier", "infra"),
    ]);
    let master = labels(&[("node-role.kubernetes.io/master", "")]);
    let plain = labels(&[("tier", "app")]);
    assert!(is_control_plane(&cp) && is_control_plane(&master) && !is_control_plane(&plain));
    let everything = BTreeMap::new();
    assert!(!node_counts(&everything, &cp));
    assert!(!node_counts(&everything, &master));
    assert!(node_counts(&everything, &plain));
    let infra = labels(&[("tier", "infra")]);
    assert!(
        node_counts(&infra, &cp),
        "a selector that picks a control-plane node wins"
    );
    assert!(!node_counts(&infra, &plain));
}

#[test]
fn node_selector_needs_every_label_with_its_value() {
    let node = labels(&[("a", "1"), ("b", "2")]);
    assert!(node_selector_matches(&BTreeMap::new(), &node));
    assert!(node_selector_matches(&labels(&[("a", "1")]), &node));
    assert!(node_selector_matches(
        &labels(&[("a", "1"), ("b", "2")]),
        &node
    ));
    assert!(!node_selector_matches(&labels(&[("a", "2")]), &node));
    assert!(!node_selector_matches(
        &labels(&[("a", "1"), ("c", "")]),
        &node
    ));
}

#[test]
fn flavor_example_nodes_group_into_one_class_per_worker_flavor() {
    let list: Value = serde_json::from_str(include_str!("../../../../example/flavor-nodes.json"))
        .expect("a node list");
    let nodes: Vec<(String, NodeInputs)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| {
            let labels = serde_json::from_value(n["metadata"]["labels"].clone()).expect("labels");
            (
                n["metadata"]["name"].as_str().expect("name").to_owned(),
                NodeInputs::new(labels),
            )
        })
        .filter(|(_, inputs)| node_counts(&BTreeMap::new(), &inputs.labels))
        .collect();
    let artifact = flavor();
    let classes = classes_of(&artifact, &nodes);
    let images: BTreeMap<String, Option<String>> = classes
        .iter()
        .map(|c| {
            let image = artifact
                .best_fit(&c.inputs, crate::engine::any_platform)
                .image()
                .map(str::to_owned);
            (c.nodes.join(","), image)
        })
        .collect();
    assert_eq!(
        images,
        BTreeMap::from([
            (
                "worker-chocolate".to_owned(),
                Some("ubuntu:24.04".to_owned())
            ),
            (
                "worker-strawberry".to_owned(),
                Some("rockylinux:9".to_owned())
            ),
            ("worker-vanilla".to_owned(), Some("debian:11".to_owned())),
        ])
    );
}
