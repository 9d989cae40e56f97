//! A small cluster for the planner's tests: four workers in two zones with three flavors, one
//! control-plane node, and a policy resolved over them by the flavor label.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::admission::Request;
use crate::api::{
    ArtifactStatus, ClassMatch, ClassStatus, ImageSelectionPolicy, ImageSelectionPolicyStatus,
};
use crate::classes::{group, node_counts};
use crate::engine::{Format, NodeInputs, Reads};
use crate::image_selection::planner::read_pod::SelectionPod;
use crate::image_selection::planner::{ImagePlan, Index};

pub(crate) const PLACEHOLDER: &str = "placeholder:latest";
pub(crate) const DIGEST: &str = "sha256:0123abcd";

pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub(crate) fn worker(name: &str, flavor: &str, zone: &str) -> (String, NodeInputs) {
    (
        name.to_owned(),
        NodeInputs::new(labels(&[
            ("flavor", flavor),
            ("zone", zone),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/hostname", name),
        ])),
    )
}

/// n1, n2: vanilla in zone a; n3: chocolate, n4: strawberry, both in zone b; cp: control plane.
pub(crate) fn inventory() -> Vec<(String, NodeInputs)> {
    let mut cp = worker("cp", "vanilla", "a");
    cp.1.labels.insert(
        "node-role.kubernetes.io/control-plane".into(),
        String::new(),
    );
    vec![
        worker("n1", "vanilla", "a"),
        worker("n2", "vanilla", "a"),
        worker("n3", "chocolate", "b"),
        worker("n4", "strawberry", "b"),
        cp,
    ]
}

/// What each flavor resolves to: vanilla → debian:11 (weight 0), chocolate → ubuntu:24.04
/// (weight 5), strawberry → nothing.
pub(crate) fn flavor_images() -> Vec<(&'static str, Option<&'static str>, i32)> {
    vec![
        ("vanilla", Some("debian:11"), 0),
        ("chocolate", Some("ubuntu:24.04"), 5),
        ("strawberry", None, 0),
    ]
}

pub(crate) fn flavor_reads() -> Reads {
    Reads {
        labels: BTreeSet::from(["flavor".to_owned()]),
        features: BTreeMap::new(),
    }
}

/// A policy with `spec` (JSON, `targetImage` and `artifact` defaulted) and no status.
pub(crate) fn policy(name: &str, spec: Value) -> ImageSelectionPolicy {
    let mut full = json!({"artifact": {"ref": format!("registry.example/{name}-compat:v1")},
                          "targetImage": PLACEHOLDER});
    if let (Some(full), Some(spec)) = (full.as_object_mut(), spec.as_object()) {
        full.extend(spec.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1",
        "kind": "ImageSelectionPolicy",
        "metadata": {"name": name},
        "spec": full,
    }))
    .unwrap()
}

/// The status the controller writes for `policy` over `nodes`, classes drawn on the flavor
/// label, each flavor's image from `images`.
pub(crate) fn status_over(
    policy: &ImageSelectionPolicy,
    nodes: &[(String, NodeInputs)],
    images: &[(&str, Option<&str>, i32)],
) -> ImageSelectionPolicyStatus {
    let reads = flavor_reads();
    let counted = nodes
        .iter()
        .filter(|(_, i)| node_counts(&policy.spec.node_selector, &i.labels))
        .map(|(n, i)| (n.as_str(), i));
    let classes: Vec<ClassStatus> = group(&reads, counted)
        .into_iter()
        .map(|class| {
            let flavor = class.labels.get("flavor").cloned().unwrap_or_default();
            let (image, weight) = images
                .iter()
                .find(|(f, _, _)| *f == flavor)
                .map_or((None, 0), |(_, image, weight)| (*image, *weight));
            ClassStatus {
                name: class.name,
                labels: class.labels,
                nodes: class.nodes.len() as i32,
                image: image.map(str::to_owned),
                matched: image.map(|image| ClassMatch {
                    index: 0,
                    tag: image.to_owned(),
                    weight,
                    description: None,
                }),
                reason: match image {
                    Some(_) => None,
                    None => Some(format!("no set matches flavor {flavor}")),
                },
            }
        })
        .collect();
    ImageSelectionPolicyStatus {
        observed_generation: Some(1),
        artifact: Some(ArtifactStatus {
            digest: DIGEST.to_owned(),
            format: Format::Ocifit,
            candidates: 2,
            fetched_at: None,
            source: None,
        }),
        class_keys: Some(reads),
        class_count: classes.len() as i32,
        classes,
        conditions: Vec::new(),
    }
}

/// `policy` resolved over the whole inventory with the flavor images.
pub(crate) fn resolved(mut policy: ImageSelectionPolicy) -> ImageSelectionPolicy {
    policy.status = Some(status_over(&policy, &inventory(), &flavor_images()));
    policy
}

pub(crate) fn index(policies: &[ImageSelectionPolicy]) -> Index {
    index_over(policies, &inventory())
}

/// An index of `policies` over `nodes`.
pub(crate) fn index_over(
    policies: &[ImageSelectionPolicy],
    nodes: &[(String, NodeInputs)],
) -> Index {
    Index::over_inputs(policies, nodes)
}

/// A pod from its JSON, as the apiserver would send it.
pub(crate) fn pod(value: Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

/// An opted-in pod with one container using the placeholder; `metadata` is merged into its
/// metadata (maps key by key), `spec` into its spec.
pub(crate) fn simple_pod(metadata: Value, spec: Value) -> Pod {
    let mut full_spec = json!({"containers": [{"name": "app", "image": PLACEHOLDER}]});
    if let (Some(full), Some(spec)) = (full_spec.as_object_mut(), spec.as_object()) {
        full.extend(spec.clone());
    }
    let mut meta = json!({"name": "p", "namespace": "default",
                          "labels": {"oci.image.compatibilities.selection/enabled": "true"}});
    if let (Some(full), Some(metadata)) = (meta.as_object_mut(), metadata.as_object()) {
        for (key, value) in metadata {
            match (
                full.get_mut(key).and_then(Value::as_object_mut),
                value.as_object(),
            ) {
                (Some(present), Some(more)) => present.extend(more.clone()),
                _ => {
                    full.insert(key.clone(), value.clone());
                }
            }
        }
    }
    pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": full_spec}))
}

/// The admission request creating `pod`.
pub(crate) fn request(pod: &Pod, dry_run: bool) -> Request<SelectionPod> {
    request_for("CREATE", Some(pod), dry_run)
}

pub(crate) fn request_for(
    operation: &str,
    pod: Option<&Pod>,
    dry_run: bool,
) -> Request<SelectionPod> {
    serde_json::from_value(json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default",
        "operation": operation,
        "userInfo": {"username": "admin"},
        "object": pod,
        "dryRun": dry_run,
    }))
    .unwrap()
}

pub(crate) fn plan(index: &Index, pod: &Pod) -> ImagePlan {
    index.plan(&request(pod, false))
}

/// The pod after applying the plan's patch (panics unless the plan is a patch).
pub(crate) fn patched(pod: &Pod, plan: &ImagePlan) -> Pod {
    let ImagePlan::Patch { patch, .. } = plan else {
        panic!("expected a patch, got {plan:?}");
    };
    let mut value = serde_json::to_value(pod).unwrap();
    json_patch::patch(&mut value, patch).unwrap();
    serde_json::from_value(value).unwrap()
}

pub(crate) fn image_of(pod: &Pod, container: &str) -> String {
    let spec = pod.spec.as_ref().unwrap();
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == container)
        .and_then(|c| c.image.clone())
        .unwrap()
}

pub(crate) fn annotation(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(key).cloned()
}

/// The names of the inventory's workers the patched pod may run on.
pub(crate) fn placed_on(pod: &Pod) -> Vec<String> {
    let placement = crate::classes::Placement::from_pod_spec(pod.spec.as_ref().unwrap()).unwrap();
    inventory()
        .into_iter()
        .filter(|(name, inputs)| {
            node_counts(&BTreeMap::new(), &inputs.labels)
                && placement.matches(&node_meta(name, &inputs.labels))
        })
        .map(|(name, _)| name)
        .collect()
}

pub(crate) fn node_meta(name: &str, labels: &BTreeMap<String, String>) -> kube::core::ObjectMeta {
    kube::core::ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels.clone()),
        ..Default::default()
    }
}

/// A denial's reason (its name) and message.
pub(crate) fn denied(plan: &ImagePlan) -> (&'static str, String) {
    match plan {
        ImagePlan::Deny { reason, .. } => (reason.as_str(), reason.to_string()),
        other => panic!("expected a denial, got {other:?}"),
    }
}

/// A hold's reason (its name) and message.
pub(crate) fn held_for(plan: &ImagePlan) -> (&'static str, String) {
    match plan {
        ImagePlan::Hold { reason, .. } => (reason.as_str(), reason.to_string()),
        other => panic!("expected a hold, got {other:?}"),
    }
}

/// A skip's reason (its name) and message.
pub(crate) fn skipped(plan: &ImagePlan) -> (&'static str, String) {
    match plan {
        ImagePlan::Skip(reason) => (reason.as_str(), reason.to_string()),
        other => panic!("expected a skip, got {other:?}"),
    }
}
