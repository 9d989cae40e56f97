//! Which policy a pod gets, and the denials when it names none or one that does not exist.

use serde_json::json;

use super::fixtures::*;
use crate::api::ImageSelectionPolicy;
use crate::api::pod::DECISION_POLICY;
use crate::image_selection::planner::ImagePlan;

const POLICY: &str = "oci.image.compatibilities.selection/policy";
const IMAGE_REF: &str = "oci.image.compatibilities.selection/image-ref";
const TARGET_IMAGE: &str = "oci.image.compatibilities.selection/target-image";

/// Two resolved policies on the same placeholder: `alpha` gives vanilla nodes `alpha:1`, `beta`
/// gives them `beta:1`, so the patched image says which policy was chosen.
fn two_policies() -> Vec<ImageSelectionPolicy> {
    ["alpha", "beta"]
        .into_iter()
        .map(|name| {
            let mut p = policy(name, json!({}));
            let image = format!("{name}:1");
            p.status = Some(status_over(
                &p,
                &inventory(),
                &[("vanilla", Some(&image), 0)],
            ));
            p
        })
        .collect()
}

fn chosen(
    index: &crate::image_selection::planner::Index,
    pod: &k8s_openapi::api::core::v1::Pod,
) -> String {
    let after = patched(pod, &plan(index, pod));
    let policy = annotation(&after, DECISION_POLICY).unwrap();
    assert_eq!(image_of(&after, "app"), format!("{policy}:1"));
    policy
}

fn zone_a() -> serde_json::Value {
    json!({"nodeSelector": {"zone": "a"}})
}

#[test]
fn the_policy_label_names_the_policy() {
    let index = index(&two_policies());
    let pod = simple_pod(
        json!({"labels": {POLICY: "beta",
        "oci.image.compatibilities.selection/enabled": "true"}}),
        zone_a(),
    );
    assert_eq!(chosen(&index, &pod), "beta");
}

#[test]
fn the_policy_annotation_names_the_policy_and_the_label_wins_over_it() {
    let index = index(&two_policies());
    let pod = simple_pod(json!({"annotations": {POLICY: "beta"}}), zone_a());
    assert_eq!(chosen(&index, &pod), "beta");
    let pod = simple_pod(
        json!({"labels": {POLICY: "alpha"}, "annotations": {POLICY: "beta"}}),
        zone_a(),
    );
    assert_eq!(chosen(&index, &pod), "alpha");
}

#[test]
fn the_image_ref_annotation_matches_a_policy_artifact() {
    let index = index(&two_policies());
    let pod = simple_pod(
        json!({"annotations": {IMAGE_REF: "registry.example/beta-compat:v1"}}),
        zone_a(),
    );
    assert_eq!(chosen(&index, &pod), "beta");
}

#[test]
fn several_policies_on_one_artifact_are_told_apart_by_their_placeholder() {
    let mut policies = two_policies();
    for p in &mut policies {
        p.spec.artifact.reference = Some("registry.example/shared:v1".into());
    }
    policies[1].spec.target_image = "other:latest".into();
    let index = index(&policies);
    let pod = simple_pod(
        json!({"annotations": {IMAGE_REF: "registry.example/shared:v1"}}),
        json!({
        "nodeSelector": {"zone": "a"}, "containers": [{"name": "app", "image": "other:latest"}]}),
    );
    assert_eq!(chosen(&index, &pod), "beta");
    let pod = simple_pod(
        json!({"annotations": {IMAGE_REF: "registry.example/shared:v1",
                               TARGET_IMAGE: "mine:1"}}),
        json!({"containers": [{"name": "app", "image": "mine:1"}]}),
    );
    let (reason, message) = denied(&plan(&index, &pod));
    assert_eq!(reason, "AmbiguousPolicy");
    assert!(message.contains("alpha, beta"), "{message}");
}

#[test]
fn an_image_ref_no_policy_uses_is_held_naming_the_policy_to_create() {
    let index = index(&two_policies());
    let pod = simple_pod(
        json!({"annotations": {IMAGE_REF: "registry.example/unknown:v2"}}),
        zone_a(),
    );
    let (reason, message) = held_for(&plan(&index, &pod));
    assert_eq!(reason, "NoPolicyForImageRef");
    assert!(
        message.contains("spec.artifact.ref: registry.example/unknown:v2"),
        "{message}"
    );
}

#[test]
fn a_named_policy_that_does_not_exist_is_held_saying_so() {
    let index = index(&two_policies());
    let pod = simple_pod(json!({"labels": {POLICY: "gamma"}}), zone_a());
    let (reason, message) = held_for(&plan(&index, &pod));
    assert_eq!(reason, "PolicyNotFound");
    assert!(
        message.contains("ImageSelectionPolicy \"gamma\""),
        "{message}"
    );
    assert!(message.contains("create it"), "{message}");
}

#[test]
fn a_container_using_a_policy_target_image_chooses_that_policy() {
    let mut policies = two_policies();
    policies[0].spec.target_image = "alpha-placeholder:1".into();
    let index = index(&policies);
    let pod = simple_pod(
        json!({}),
        json!({"nodeSelector": {"zone": "a"},
        "containers": [{"name": "app", "image": "alpha-placeholder:1"}]}),
    );
    assert_eq!(chosen(&index, &pod), "alpha");
}

#[test]
fn several_policies_on_one_target_image_are_denied_naming_them() {
    let index = index(&two_policies());
    let (reason, message) = denied(&plan(&index, &simple_pod(json!({}), zone_a())));
    assert_eq!(reason, "AmbiguousPolicy");
    assert!(message.contains("alpha, beta"), "{message}");
    assert!(message.contains(POLICY), "{message}");
}

#[test]
fn a_pod_with_no_policy_is_denied_saying_how_to_name_one() {
    let index = index(&two_policies());
    let pod = simple_pod(
        json!({}),
        json!({"containers": [{"name": "app", "image": "nginx:1"}]}),
    );
    let (reason, message) = denied(&plan(&index, &pod));
    assert_eq!(reason, "NoPolicy");
    assert!(message.contains(POLICY), "{message}");
}

#[test]
fn the_target_image_annotation_overrides_the_placeholder() {
    let index = index(&two_policies());
    let pod = simple_pod(
        json!({"labels": {POLICY: "alpha"}, "annotations": {TARGET_IMAGE: "seed/placeholder:v0"}}),
        json!({"nodeSelector": {"zone": "a"}, "containers": [
            {"name": "app", "image": "seed/placeholder:v0"},
            {"name": "side", "image": PLACEHOLDER}]}),
    );
    let after = patched(&pod, &plan(&index, &pod));
    assert_eq!(image_of(&after, "app"), "alpha:1");
    assert_eq!(image_of(&after, "side"), PLACEHOLDER);
}

#[test]
fn a_named_policy_whose_placeholder_no_container_uses_leaves_the_pod_alone() {
    let index = index(&two_policies());
    let pod = simple_pod(
        json!({"labels": {POLICY: "alpha"}}),
        json!({"containers": [{"name": "app", "image": "nginx:1"}]}),
    );
    let plan = plan(&index, &pod);
    let (reason, message) = skipped(&plan);
    assert_eq!(reason, "NoPlaceholder");
    assert!(message.contains(PLACEHOLDER), "{message}");
    assert!(!matches!(plan, ImagePlan::Patch { .. }));
}

#[test]
fn a_pod_asking_for_ocifit_k8s_model_selection_is_refused_not_held() {
    let index = index(&two_policies());
    // As ocifit-k8s's model example writes it: an artifact no policy uses, and a model.
    let pod = simple_pod(
        json!({"annotations": {
            IMAGE_REF: "registry.example/ml-compatibility:v1",
            "oci.image.compatibilities.selection/model": "lammps-fom",
        }}),
        zone_a(),
    );
    let (reason, message) = denied(&plan(&index, &pod));
    assert_eq!(reason, "ModelUnsupported");
    assert!(message.contains("\"lammps-fom\""), "{message}");
    assert!(message.contains("not support"), "{message}");
    assert!(
        message.contains("ImageSelectionPolicy whose spec.artifact.ref"),
        "{message}"
    );
}
