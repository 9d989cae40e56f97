//! The reconcile of one policy over 5,000 nodes: the pure status computation (grouping into
//! classes, best fit per class, platform check, conditions) and the node inventory it is fed
//! from, as the controller runs them on every reconcile.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use ocifit::api::ImageSelectionPolicySpec;
use ocifit::cluster::node_inputs;
use ocifit::cluster::{ClusterNode, Strings};
use ocifit::image_selection::policy_status;
use ocifit_cluster_tests::flavor_example::FlavorExample;

const NODES: usize = 5_000;
const FLAVORS: [&str; 3] = ["vanilla", "chocolate", "strawberry"];
const ARCHES: [&str; 2] = ["amd64", "arm64"];

fn nodes() -> Vec<Arc<ClusterNode>> {
    let mut strings = Strings::default();
    (0..NODES)
        .map(|i| {
            let name = format!("node-{i:05}");
            let labels = BTreeMap::from([
                (
                    "feature.node.ocifit-k8s.flavor".to_owned(),
                    FLAVORS[i % 3].to_owned(),
                ),
                ("kubernetes.io/arch".to_owned(), ARCHES[i % 2].to_owned()),
                ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                ("kubernetes.io/hostname".to_owned(), name.clone()),
                (
                    "topology.kubernetes.io/zone".to_owned(),
                    format!("zone-{}", i % 4),
                ),
                (
                    "node.kubernetes.io/instance-type".to_owned(),
                    format!("m{}.large", i % 7),
                ),
            ]);
            let labels = labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            Arc::new(ClusterNode::new(&name, labels, &mut strings))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let example = FlavorExample::load().expect("the flavor example");
    let spec: ImageSelectionPolicySpec = serde_json::from_value(serde_json::json!({
        "artifact": {"ref": "registry.example.com/flavor-compat:v1"},
        "targetImage": "placeholder:latest"
    }))
    .expect("a spec");
    let metadata = nodes();
    let inventory = node_inputs(&metadata, &[], "node-feature-discovery", |_| true);
    let previous = policy_status(&example.inputs(&spec, &inventory, None)).status;
    assert_eq!(previous.class_count, 6);

    c.bench_function("status over 5000 nodes", |b| {
        b.iter(|| {
            policy_status(black_box(&example.inputs(
                &spec,
                &inventory,
                Some(&previous),
            )))
        })
    });
    c.bench_function("inventory and status over 5000 nodes", |b| {
        b.iter(|| {
            let inventory =
                node_inputs(black_box(&metadata), &[], "node-feature-discovery", |_| {
                    true
                });
            policy_status(&example.inputs(&spec, &inventory, Some(&previous)))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
