//! Node inputs: NodeFeature objects merged per node, features projected from labels, and NFD's
//! wire shape.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::labels;
use crate::engine::{FeatureSource, Features, NodeFeature, NodeInputs, features_by_node};

fn object(
    name: &str,
    namespace: &str,
    node: Option<&str>,
    features: serde_json::Value,
) -> NodeFeature {
    let labels = node.map(|n| json!({"nfd.node.kubernetes.io/node-name": n}));
    serde_json::from_value(json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"features": features, "labels": {"ignored": "yes"}},
        "status": {"whatever": true}}))
    .expect("a NodeFeature")
}

#[test]
fn several_node_feature_objects_merge_per_node() {
    let items = [
        object(
            "n1-extra",
            "other",
            Some("n1"),
            json!({
            "flags": {"cpu.cpuid": {"elements": {"AVX512F": {}}}},
            "attributes": {"kernel.version": {"elements": {"major": "7"}}},
            "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "10de"}}]}}}),
        ),
        object(
            "n1",
            "node-feature-discovery",
            Some("n1"),
            json!({
            "flags": {"cpu.cpuid": {"elements": {"AVX2": {}}}},
            "attributes": {"kernel.version": {"elements": {"major": "6", "minor": "8"}}},
            "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "8086"}}]}}}),
        ),
        object(
            "n2",
            "node-feature-discovery",
            Some("n2"),
            json!({"flags": null, "attributes": {"a.b": {"elements": null}}}),
        ),
        object(
            "orphan",
            "node-feature-discovery",
            None,
            json!({"flags": {"x.y": {"elements": {"z": {}}}}}),
        ),
    ];
    let merged = features_by_node(&items, "node-feature-discovery");
    assert_eq!(
        merged.keys().collect::<Vec<_>>(),
        ["n1", "n2"],
        "objects without a node label are ignored"
    );
    let n1 = &merged["n1"];
    assert_eq!(
        n1.flags["cpu.cpuid"],
        BTreeSet::from(["AVX2".to_owned(), "AVX512F".to_owned()])
    );
    // NFD's own namespace merges first, so the other object's value wins.
    assert_eq!(n1.attributes["kernel.version"]["major"], "7");
    assert_eq!(n1.attributes["kernel.version"]["minor"], "8");
    let vendors: Vec<_> = n1.instances["pci.device"]
        .iter()
        .map(|i| i["vendor"].as_str())
        .collect();
    assert_eq!(vendors, ["8086", "10de"]);
    assert_eq!(
        merged["n2"].attributes["a.b"],
        BTreeMap::new(),
        "null elements read as empty"
    );
}

#[test]
fn features_serialize_in_nfd_wire_shape() {
    let wire = json!({
        "flags": {"cpu.cpuid": {"elements": {"AVX2": {}}}},
        "attributes": {"kernel.version": {"elements": {"major": "6"}}},
        "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "10de"}}]}}});
    let features: Features = serde_json::from_value(wire.clone()).expect("NFD's shape");
    assert_eq!(serde_json::to_value(&features).expect("serializable"), wire);
}

#[test]
fn labels_project_to_features_only_where_unambiguous() {
    let node = NodeInputs::new(labels(&[
        ("feature.node.kubernetes.io/cpu-cpuid.AVX2", "true"),
        ("feature.node.kubernetes.io/cpu-cpuid.AVX10_VERSION", "1"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "AMD"),
        (
            "feature.node.kubernetes.io/cpu-hardware_multithreading",
            "true",
        ),
        (
            "feature.node.kubernetes.io/cpu-security.sgx.enabled",
            "true",
        ),
        ("feature.node.kubernetes.io/kernel-version.major", "6"),
        ("feature.node.kubernetes.io/kernel-selinux.enabled", "true"),
        (
            "feature.node.kubernetes.io/system-os_release.VERSION_ID.major",
            "24",
        ),
        ("feature.node.kubernetes.io/kernel-config.NO_HZ", "true"),
        ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
        (
            "feature.node.kubernetes.io/storage-nonrotationaldisk",
            "true",
        ),
        ("feature.node.ocifit-k8s.flavor", "vanilla"),
        ("kubernetes.io/arch", "amd64"),
    ]));
    let (features, source) = node.nfd_features();
    assert_eq!(source, FeatureSource::Labels);
    let expected: Features = serde_json::from_value(json!({
        "flags": {"cpu.cpuid": {"elements": {"AVX2": {}}}},
        "attributes": {
            "cpu.cpuid": {"elements": {"AVX10_VERSION": "1"}},
            "cpu.model": {"elements": {"vendor_id": "AMD"}},
            "cpu.topology": {"elements": {"hardware_multithreading": "true"}},
            "cpu.security": {"elements": {"sgx.enabled": "true"}},
            "kernel.version": {"elements": {"major": "6"}},
            "kernel.selinux": {"elements": {"enabled": "true"}},
            "system.osrelease": {"elements": {"VERSION_ID.major": "24"}}}}))
    .expect("features");
    assert_eq!(*features, expected);
}

#[test]
fn node_feature_objects_take_precedence_over_labels() {
    let node = NodeInputs::new(labels(&[(
        "feature.node.kubernetes.io/cpu-cpuid.AVX2",
        "true",
    )]))
    .with_features(Some(Features::default()));
    let (features, source) = node.nfd_features();
    assert_eq!(source, FeatureSource::NodeFeature);
    assert_eq!(*features, Features::default());
}

#[test]
fn node_feature_is_a_kube_resource_at_nfd_api_path() {
    use kube_core::Resource;
    assert_eq!(
        NodeFeature::url_path(&(), Some("node-feature-discovery")),
        "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/node-feature-discovery/nodefeatures"
    );
    assert_eq!(NodeFeature::kind(&()), "NodeFeature");
}
