//! The example artifacts under `example/` and NFD's documented example parse and evaluate as
//! their authors mean; format detection tells them apart.

use std::collections::BTreeMap;

use serde_json::Value;

use super::fit;
use crate::engine::{
    Artifact, ArtifactError, Format, NodeFeatureList, NodeInputs, any_platform, features_by_node,
};

const FLAVOR_COMPAT: &[u8] = include_bytes!("../../../../example/flavor-compat.json");
const FLAVOR_NODES: &str = include_str!("../../../../example/flavor-nodes.json");
const NFD_COMPAT: &[u8] = include_bytes!("../../../../example/nfd-compat.yaml");
const NFD_NODES: &str = include_str!("../../../../example/nfd-nodes.json");
const NFD_NODEFEATURES: &str = include_str!("../../../../example/nfd-nodefeatures.json");

/// NFD's documented example (docs/usage/image-compatibility.md, with compat-formats.md §2's
/// `matchName` and `type: version` terms).
const NFD_DOC_EXAMPLE: &str = r#"
version: v1alpha1
compatibilities:
- description: "my image requirements"
  tag: preferred
  weight: 10
  rules:
  - name: "kernel and cpu"
    matchFeatures:
    - feature: kernel.loadedmodule
      matchExpressions:
        vfio-pci: {op: Exists}
    - feature: cpu.model
      matchExpressions:
        vendor_id: {op: In, value: ["Intel", "AMD"]}
    - feature: cpu.cpuid
      matchName: {op: InRegexp, value: ["^AVX"]}
    - feature: kernel.version
      matchExpressions:
        major: {op: Ge, value: ["6"], type: version}
  - name: "one of available nics"
    matchAny:
    - matchFeatures:
      - feature: pci.device
        matchExpressions:
          vendor: {op: In, value: ["0eee"]}
          class: {op: In, value: ["0200"]}
    - matchFeatures:
      - feature: pci.device
        matchExpressions:
          vendor: {op: In, value: ["0fff"]}
          class: {op: In, value: ["0200"]}
"#;

/// (name, labels) of every node in a `kubectl get nodes -o json` list.
fn nodes(list: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let list: Value = serde_json::from_str(list).expect("a node list");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| {
            let name = n["metadata"]["name"].as_str().expect("a name").to_owned();
            let labels = serde_json::from_value(n["metadata"]["labels"].clone()).expect("labels");
            (name, labels)
        })
        .collect()
}

#[test]
fn flavor_example_gives_each_flavor_its_image() {
    let artifact =
        Artifact::parse(Format::Ocifit, FLAVOR_COMPAT).expect("the seed's example parses");
    let tags: Vec<_> = artifact.sets().iter().map(|s| s.tag()).collect();
    assert_eq!(tags, ["debian:11", "ubuntu:24.04", "rockylinux:9"]);
    let expected = BTreeMap::from([
        ("worker-vanilla", Some("debian:11")),
        ("worker-chocolate", Some("ubuntu:24.04")),
        ("worker-strawberry", Some("rockylinux:9")),
        ("control-plane", None),
    ]);
    for (name, labels) in nodes(FLAVOR_NODES) {
        let explanation = fit(&artifact, &NodeInputs::new(labels));
        assert_eq!(explanation.image(), expected[name.as_str()], "{name}");
    }
    assert_eq!(
        artifact.reads().labels.into_iter().collect::<Vec<_>>(),
        ["feature.node.ocifit-k8s.flavor"]
    );
}

fn doc_example_features(vendor: &str) -> Value {
    serde_json::json!({
        "flags": {
            "kernel.loadedmodule": {"elements": {"vfio-pci": {}}},
            "cpu.cpuid": {"elements": {"AVX": {}, "SSE4": {}}}},
        "attributes": {
            "cpu.model": {"elements": {"vendor_id": "Intel"}},
            "kernel.version": {"elements": {"major": "6", "full": "6.8.0"}}},
        "instances": {"pci.device": {"elements": [
            {"attributes": {"vendor": "8086", "class": "0300"}},
            {"attributes": {"vendor": vendor, "class": "0200"}}]}}})
}

#[test]
fn nfd_documented_example_parses_and_evaluates() {
    let artifact =
        Artifact::parse(Format::Nfd, NFD_DOC_EXAMPLE.as_bytes()).expect("NFD's example parses");
    assert_eq!(artifact.sets()[0].tag(), "preferred");
    assert_eq!(artifact.sets()[0].weight(), 10);
    assert_eq!(artifact.sets()[0].rule_count(), 2);
    for vendor in ["0eee", "0fff"] {
        let node = super::featured(doc_example_features(vendor));
        assert_eq!(fit(&artifact, &node).image(), Some("preferred"), "{vendor}");
    }
    let explanation = fit(&artifact, &super::featured(doc_example_features("8086")));
    assert_eq!(explanation.chosen, None);
    let failure = explanation.sets[0].failure.clone().expect("a failure");
    assert_eq!(
        (failure.rule, failure.rule_name.as_deref()),
        (Some(1), Some("one of available nics"))
    );
    let reads = artifact.reads();
    assert!(reads.features["cpu.cpuid"].names);
    assert_eq!(
        reads.features["pci.device"]
            .elements
            .iter()
            .collect::<Vec<_>>(),
        ["class", "vendor"]
    );
}

#[test]
fn nfd_example_picks_by_node_features_merged_or_projected_from_labels() {
    let artifact = Artifact::parse(Format::Nfd, NFD_COMPAT).expect("the NFD example parses");
    let list: NodeFeatureList = serde_json::from_str(NFD_NODEFEATURES).expect("a NodeFeature list");
    let mut features = features_by_node(&list.items, "node-feature-discovery");
    let expected = BTreeMap::from([
        ("gpu-1", Some("registry.example.com/acme/app:v1-cuda")),
        ("avx512-1", Some("registry.example.com/acme/app:v1-avx512")),
        ("avx2-1", Some("registry.example.com/acme/app:v1-avx2")),
        ("old-1", Some("registry.example.com/acme/app:v1-generic")),
        (
            "control-plane",
            Some("registry.example.com/acme/app:v1-generic"),
        ),
    ]);
    for (name, labels) in nodes(NFD_NODES) {
        let inputs = NodeInputs::new(labels).with_features(features.remove(&name));
        let explanation = artifact.best_fit(&inputs, any_platform);
        assert_eq!(
            explanation.image(),
            expected[name.as_str()],
            "{name}: {explanation:#?}"
        );
    }
}

#[test]
fn detect_tells_the_formats_apart_by_shape() {
    let flavor = Format::detect(FLAVOR_COMPAT).expect("detectable");
    assert_eq!(
        flavor,
        (
            Format::Ocifit,
            "a matchExpressions is a list of {key, op, value}, the ocifit form"
        )
    );
    let nfd = Format::detect(NFD_COMPAT).expect("detectable");
    assert_eq!(nfd.0, Format::Nfd);
    let doc: Value = serde_saphyr::from_str(NFD_DOC_EXAMPLE).expect("YAML");
    assert_eq!(
        Format::detect(doc.to_string().as_bytes()).expect("detectable"),
        (
            Format::Nfd,
            "a rule has name, matchAny, vars or varsTemplate, fields of NFD's GroupRule only"
        )
    );
    let map_form = br#"{"compatibilities": [{"rules": [{"matchFeatures": [{"matchExpressions": {"a": {"op": "Exists"}}}]}]}]}"#;
    assert_eq!(Format::detect(map_form).expect("detectable").0, Format::Nfd);
    let bare_json = br#"{"compatibilities": [{"tag": "a", "rules": []}]}"#;
    assert_eq!(
        Format::detect(bare_json).expect("detectable").0,
        Format::Ocifit
    );
    let bare_yaml = b"compatibilities:\n- tag: a\n  rules: []\n";
    assert_eq!(
        Format::detect(bare_yaml).expect("detectable").0,
        Format::Nfd
    );
    let neither = Format::detect(b"apiVersion: v1\nkind: Pod\n").err();
    assert!(
        matches!(neither, Some(ArtifactError::Undetectable { .. })),
        "{neither:?}"
    );
    let garbage = Format::detect(b"{[").err();
    assert!(
        matches!(garbage, Some(ArtifactError::Yaml { .. })),
        "{garbage:?}"
    );
}

#[test]
fn format_names_round_trip() {
    for format in [Format::Ocifit, Format::Nfd] {
        assert_eq!(format.to_string().parse::<Format>().ok(), Some(format));
        assert_eq!(
            serde_json::to_value(format).ok(),
            Some(Value::from(format.to_string()))
        );
    }
    assert!("NFD".parse::<Format>().is_err());
}
