//! The policy ocifit takes charge of for a pod naming, by the seed's `image-ref` annotation, an
//! artifact no policy uses: named after the artifact (so every replica and every such pod agree
//! on one), labelled managed, its placeholder the pod's `target-image` annotation or else its
//! first container's image. Written by the release controller, never at admission. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use sha2::{Digest, Sha256};

use crate::api::pod::{MANAGED_LABEL, TARGET_IMAGE_ANNOTATION};
use crate::api::{
    ArtifactSource, ImageSelectionPolicy, ImageSelectionPolicySpec, OnNoMatch, OnUnpinned,
};

/// The prefix of a managed policy's name.
pub const MANAGED_PREFIX: &str = "ocifit-image-ref-";

/// The name of the managed policy for `reference`.
pub fn managed_name(reference: &str) -> String {
    let digest = Sha256::digest(reference.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{MANAGED_PREFIX}{hex}")
}

/// The policy to create for `pod`, whose `image-ref` is `reference`; `None` when the pod names
/// no placeholder at all (no annotation, no container).
pub fn managed_policy(pod: &Pod, reference: &str) -> Option<ImageSelectionPolicy> {
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TARGET_IMAGE_ANNOTATION))
        .filter(|image| !image.is_empty());
    let first = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.containers.first())
        .and_then(|container| container.image.as_ref());
    let placeholder = annotated.or(first)?;
    let mut policy = ImageSelectionPolicy::new(
        &managed_name(reference),
        ImageSelectionPolicySpec {
            artifact: ArtifactSource {
                reference: Some(reference.to_owned()),
                candidates: None,
                refresh_interval: None,
                pull_secret_ref: None,
            },
            target_image: placeholder.clone(),
            node_selector: BTreeMap::new(),
            on_unpinned: OnUnpinned::default(),
            on_no_match: OnNoMatch::default(),
            fallback_image: None,
            include_init_containers: false,
        },
    );
    policy.metadata.labels = Some(BTreeMap::from([(
        MANAGED_LABEL.to_owned(),
        "true".to_owned(),
    )]));
    Some(policy)
}

/// Whether `policy` is one ocifit took charge of.
pub fn is_managed(policy: &ImageSelectionPolicy) -> bool {
    policy
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(MANAGED_LABEL))
        .is_some_and(|value| value == "true")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::image_selection::planner::tests::fixtures::{PLACEHOLDER, simple_pod};

    #[test]
    fn one_artifact_gives_one_name_and_the_pods_placeholder() {
        let pod = simple_pod(json!({}), json!({}));
        let policy = managed_policy(&pod, "registry.example/app-compat:v1").unwrap();
        assert_eq!(
            policy.metadata.name,
            Some(managed_name("registry.example/app-compat:v1"))
        );
        assert_ne!(
            managed_name("registry.example/app-compat:v1"),
            managed_name("registry.example/app-compat:v2")
        );
        assert!(is_managed(&policy));
        assert_eq!(policy.spec.target_image, PLACEHOLDER);
        assert_eq!(
            policy.spec.artifact.reference.as_deref(),
            Some("registry.example/app-compat:v1")
        );
        assert_eq!(policy.spec.artifact.pull_secret_ref, None);
        let annotated = simple_pod(
            json!({"annotations": {TARGET_IMAGE_ANNOTATION: "other:1"}}),
            json!({}),
        );
        let policy = managed_policy(&annotated, "r/a:v1").unwrap();
        assert_eq!(policy.spec.target_image, "other:1");
    }
}
