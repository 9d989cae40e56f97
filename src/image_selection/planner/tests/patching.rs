//! The JSON patch applies to the pod exactly as the apiserver sends it: escaped pointers,
//! missing parents added first, only what changes written.

use serde_json::json;

use super::fixtures::*;
use crate::api::pod::{
    DECISION_ARTIFACT_DIGEST, DECISION_CLASSES, DECISION_IMAGES, DECISION_POLICY,
};
use crate::image_selection::planner::ImagePlan;

fn operations(plan: &ImagePlan) -> Vec<(String, String)> {
    let ImagePlan::Patch { patch, .. } = plan else {
        panic!("expected a patch, got {plan:?}");
    };
    let ops = serde_json::to_value(patch).unwrap();
    ops.as_array()
        .unwrap()
        .iter()
        .map(|op| {
            (
                op["op"].as_str().unwrap().to_owned(),
                op["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn flavors_index() -> crate::image_selection::planner::Index {
    index(&[resolved(policy("flavors", json!({})))])
}

#[test]
fn a_pod_without_annotations_gets_the_map_added_whole() {
    let index = flavors_index();
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"zone": "a"}}));
    let plan = plan(&index, &pod);
    assert_eq!(
        operations(&plan),
        [
            ("replace".into(), "/spec/containers/0/image".into()),
            ("add".into(), "/metadata/annotations".into()),
        ]
    );
    let ImagePlan::Patch { annotations, .. } = &plan else {
        unreachable!()
    };
    let after = patched(&pod, &plan);
    for key in [
        DECISION_POLICY,
        DECISION_IMAGES,
        DECISION_CLASSES,
        DECISION_ARTIFACT_DIGEST,
    ] {
        assert_eq!(
            annotation(&after, key),
            annotations.get(key).cloned(),
            "{key}"
        );
    }
}

#[test]
fn annotation_keys_are_escaped_and_other_annotations_kept() {
    let index = flavors_index();
    let pod = simple_pod(
        json!({"annotations": {"team": "a", DECISION_POLICY: "flavors"}}),
        json!({"nodeSelector": {"zone": "a"}}),
    );
    let plan = plan(&index, &pod);
    let paths: Vec<String> = operations(&plan)
        .into_iter()
        .map(|(_, path)| path)
        .collect();
    assert!(
        paths.contains(&"/metadata/annotations/ocifit.io~1images".to_owned()),
        "{paths:?}"
    );
    assert!(
        !paths.contains(&"/metadata/annotations/ocifit.io~1policy".to_owned()),
        "an annotation already holding its value is not rewritten: {paths:?}"
    );
    let after = patched(&pod, &plan);
    assert_eq!(annotation(&after, "team").as_deref(), Some("a"));
    assert_eq!(
        annotation(&after, DECISION_POLICY).as_deref(),
        Some("flavors")
    );
}

#[test]
fn a_generate_name_pod_without_a_name_is_patched() {
    let index = flavors_index();
    let mut value = serde_json::to_value(simple_pod(
        json!({}),
        json!({"nodeSelector": {"zone": "a"}}),
    ))
    .unwrap();
    value["metadata"].as_object_mut().unwrap().remove("name");
    value["metadata"]["generateName"] = json!("web-");
    let pod = pod(value);
    let after = patched(&pod, &plan(&index, &pod));
    assert_eq!(image_of(&after, "app"), "debian:11");
    assert_eq!(after.metadata.generate_name.as_deref(), Some("web-"));
}

#[test]
fn pinning_writes_affinity_at_the_shallowest_missing_level() {
    let index = flavors_index();
    let required = json!({"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "Exists"}]}]});
    let cases = [
        (json!(null), ("add", "/spec/affinity")),
        (json!({}), ("add", "/spec/affinity/nodeAffinity")),
        (
            json!({"podAntiAffinity": {}}),
            ("add", "/spec/affinity/nodeAffinity"),
        ),
        (
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}),
            (
                "add",
                "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
            ),
        ),
        (
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}),
            (
                "replace",
                "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
            ),
        ),
    ];
    for (affinity, (op, path)) in cases {
        let spec = if affinity.is_null() {
            json!({})
        } else {
            json!({"affinity": affinity})
        };
        let pod = simple_pod(json!({}), spec);
        let plan = plan(&index, &pod);
        let ops = operations(&plan);
        assert!(
            ops.contains(&(op.to_owned(), path.to_owned())),
            "{affinity}: {ops:?}"
        );
        let after = patched(&pod, &plan);
        assert_eq!(placed_on(&after), ["n1", "n2"], "{affinity}");
        assert_eq!(image_of(&after, "app"), "debian:11");
    }
}
