//! Planning one pod against 5,000 nodes in 10 classes and 100 policies, with the index built
//! once (what the webhook does per request), and the cost of rebuilding that index (what it does
//! when the policy or node stores change).

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ocifit::admission::Request;
use ocifit::api::{ClassMatch, ClassStatus, ImageSelectionPolicy, ImageSelectionPolicyStatus};
use ocifit::classes::group;
use ocifit::engine::{NodeInputs, Reads};
use ocifit::image_selection::SelectionPod;
use ocifit::image_selection::{ImagePlan, Index};
use serde_json::{Value, json};

const NODES: usize = 5_000;
const FLAVORS: usize = 10;
const ZONES: usize = 5;
const POLICIES: usize = 100;

fn nodes() -> Vec<(String, NodeInputs)> {
    (0..NODES)
        .map(|at| {
            let name = format!("node-{at:05}");
            let mut labels: BTreeMap<String, String> = [
                ("flavor", format!("f{}", at % FLAVORS)),
                ("topology.kubernetes.io/zone", format!("z{}", at % ZONES)),
                ("topology.kubernetes.io/region", "r1".to_owned()),
                ("kubernetes.io/arch", "amd64".to_owned()),
                ("kubernetes.io/os", "linux".to_owned()),
                ("kubernetes.io/hostname", name.clone()),
                (
                    "node.kubernetes.io/instance-type",
                    format!("m{}.large", at % 3),
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            for extra in 0..8 {
                labels.insert(format!("example.com/label-{extra}"), "x".to_owned());
            }
            (name, NodeInputs::new(labels))
        })
        .collect()
}

/// Policy `i` reads the flavor label (and, with `distinct`, a key of its own family, so ten
/// families of policies need ten groupings) and gives flavor `f` the image `app-i:f`.
fn policies(nodes: &[(String, NodeInputs)], distinct: bool) -> Vec<ImageSelectionPolicy> {
    (0..POLICIES)
        .map(|i| {
            let mut policy: ImageSelectionPolicy = serde_json::from_value(json!({
                "apiVersion": "ocifit.io/v1alpha1", "kind": "ImageSelectionPolicy",
                "metadata": {"name": format!("p{i}")},
                "spec": {"artifact": {"ref": format!("registry.example/p{i}-compat:v1")},
                         "targetImage": format!("placeholder-{i}:latest")}}))
            .expect("a valid policy");
            let mut labels = BTreeSet::from(["flavor".to_owned()]);
            if distinct {
                labels.insert(format!("example.com/family-{}", i % 10));
            }
            let reads = Reads {
                labels,
                features: BTreeMap::new(),
            };
            let classes: Vec<ClassStatus> =
                group(&reads, nodes.iter().map(|(n, i)| (n.as_str(), i)))
                    .into_iter()
                    .map(|class| {
                        let image = format!("app-{i}:{}", class.labels["flavor"]);
                        ClassStatus {
                            name: class.name,
                            labels: class.labels,
                            nodes: class.nodes.len() as i32,
                            image: Some(image.clone()),
                            matched: Some(ClassMatch {
                                index: 0,
                                tag: image,
                                weight: 0,
                                description: None,
                            }),
                            reason: None,
                        }
                    })
                    .collect();
            policy.status = Some(ImageSelectionPolicyStatus {
                class_keys: Some(reads),
                class_count: classes.len() as i32,
                classes,
                ..ImageSelectionPolicyStatus::default()
            });
            policy
        })
        .collect()
}

fn request(spec: Value) -> Request<SelectionPod> {
    let mut full = json!({"containers": [{"name": "app", "image": "placeholder-57:latest"},
                                         {"name": "sidecar", "image": "envoy:1"}]});
    if let (Some(full), Some(spec)) = (full.as_object_mut(), spec.as_object()) {
        full.extend(spec.clone());
    }
    serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "userInfo": {}, "namespace": "default",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "object": {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"generateName": "web-", "namespace": "default",
                                "labels": {"oci.image.compatibilities.selection/enabled": "true"}},
                   "spec": full},
    }))
    .expect("a valid request")
}

fn bench(c: &mut Criterion) {
    let nodes = nodes();
    let shared = policies(&nodes, false);
    let index = Index::over_inputs(&shared, &nodes);
    let affinity = |other: &str| {
        request(json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]},
                    {"key": "flavor", "operator": "NotIn", "values": ["f0", other]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-00010"]}]}]}}}}))
    };
    let pods = [
        (
            "selected",
            request(json!({"nodeSelector": {"flavor": "f3"}})),
        ),
        ("pinned", request(json!({}))),
        ("affinity", affinity("f99")),
    ];
    for (name, request) in &pods {
        assert!(
            matches!(index.plan(request), ImagePlan::Patch { .. }),
            "{name} plans a patch"
        );
        c.bench_function(&format!("plan/{name}"), |b| {
            b.iter(|| index.plan(black_box(request)))
        });
    }
    // Each request a placement never seen before: on a zone and a node name, the walk over all
    // 5,000 nodes; on the flavor label (a class key), one node per class.
    let flavors = |other: &str| {
        request(json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [
                    {"key": "flavor", "operator": "In", "values": ["f3", other]}]}]}}}}))
    };
    let fresh = [
        ("affinity", &affinity as &dyn Fn(&str) -> _),
        ("class-keys", &flavors),
    ];
    for (name, make) in fresh {
        let mut seen = 0u64;
        c.bench_function(&format!("plan/{name}-first-sight"), |b| {
            b.iter_batched(
                || {
                    seen += 1;
                    make(&format!("never-{seen}"))
                },
                |request| index.plan(&request),
                BatchSize::SmallInput,
            )
        });
    }
    let distinct = policies(&nodes, true);
    let mut group = c.benchmark_group("index");
    group.sample_size(10);
    for (name, policies) in [("shared-keys", &shared), ("ten-key-families", &distinct)] {
        group.bench_function(name, |b| {
            b.iter(|| Index::over_inputs(black_box(policies), &nodes))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
