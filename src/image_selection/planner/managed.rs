//! The policy ocifit takes charge of for a pod naming, by the seed's `image-ref` annotation, an
//! artifact no policy uses: named after the artifact (so every replica and every such pod agree
//! on one), labelled managed and with the namespace it counts against. Its placeholder serves
//! no pod: each pod's own is its `target-image` annotation or else its first container's image
//! ([`pod_placeholder`]), so one tenant's pod never decides which container another's has
//! replaced. Written by the release controller, never at admission, within [`Quota`]. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::core::ObjectMeta;
use sha2::{Digest, Sha256};

use crate::api::pod::{MANAGED_LABEL, MANAGED_NAMESPACE_LABEL, TARGET_IMAGE_ANNOTATION};
use crate::api::{
    ArtifactSource, FIELD_MANAGER, ImageSelectionPolicy, ImageSelectionPolicySpec, OnNoMatch,
    OnUnpinned,
};

/// The prefix of a managed policy's name.
pub(super) const MANAGED_PREFIX: &str = "ocifit-image-ref-";

/// The name of the managed policy for `reference`: 128 bits of its SHA-256 (no two artifacts
/// meet on one name; the name stays a valid label value, as pods carry it).
pub fn managed_name(reference: &str) -> String {
    let digest = Sha256::digest(reference.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{MANAGED_PREFIX}{hex}")
}

/// The image a pod naming a managed policy's artifact has replaced: its `target-image`
/// annotation, else its first container's image.
pub(super) fn pod_placeholder<'p>(meta: &'p ObjectMeta, spec: &'p PodSpec) -> Option<&'p String> {
    let annotated = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(TARGET_IMAGE_ANNOTATION))
        .filter(|image| !image.is_empty());
    let first = spec
        .containers
        .first()
        .and_then(|container| container.image.as_ref());
    annotated.or(first)
}

/// The policy to create for `pod`, whose `image-ref` is `reference`; `None` when the pod names
/// no placeholder at all (no annotation, no container) or has no namespace.
pub(super) fn managed_policy(pod: &Pod, reference: &str) -> Option<ImageSelectionPolicy> {
    let placeholder = pod_placeholder(&pod.metadata, pod.spec.as_ref()?)?;
    let namespace = pod.metadata.namespace.as_ref()?;
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
    policy.metadata.labels = Some(BTreeMap::from([
        (MANAGED_LABEL.to_owned(), "true".to_owned()),
        (MANAGED_NAMESPACE_LABEL.to_owned(), namespace.clone()),
    ]));
    Some(policy)
}

/// How many managed policies may exist: per namespace that caused them, and in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Per namespace (the label [`MANAGED_NAMESPACE_LABEL`]).
    pub per_namespace: usize,
    /// In the cluster.
    pub global: usize,
}

/// Whether a managed policy may be created now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Room {
    /// It exists already (or is being created): nothing to create.
    Exists,
    /// Within both quotas.
    Free,
    /// Over a quota; why, for the pod's Event and annotation.
    Full(String),
}

/// Whether `policy` may be created, given the managed policies there are (name and the
/// namespace each counts against).
pub(crate) fn room<'a>(
    there: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    policy: &ImageSelectionPolicy,
    quota: Quota,
) -> Room {
    let name = policy.metadata.name.as_deref().unwrap_or_default();
    let namespace = counted_against(policy);
    let (mut all, mut ours) = (0, 0);
    for (existing, against) in there {
        if existing == name {
            return Room::Exists;
        }
        all += 1;
        if against.is_some() && against == namespace {
            ours += 1;
        }
    }
    let namespace = namespace.unwrap_or_default();
    if ours >= quota.per_namespace {
        Room::Full(format!(
            "namespace {namespace} has caused {ours} policies for image-refs no policy used, \
             its quota (--image-ref-policies-per-namespace); ask an admin for a policy for this \
             artifact, or remove pods naming unused ones"
        ))
    } else if all >= quota.global {
        Room::Full(format!(
            "the cluster has {all} policies for image-refs no policy used, its quota \
             (--image-ref-policies-max); ask an admin for a policy for this artifact"
        ))
    } else {
        Room::Free
    }
}

/// The namespace a managed policy counts against.
pub(crate) fn counted_against(policy: &ImageSelectionPolicy) -> Option<&str> {
    policy
        .metadata
        .labels
        .as_ref()?
        .get(MANAGED_NAMESPACE_LABEL)
        .map(String::as_str)
}

/// Why `existing`, found under the name of the managed policy `wanted`, is not it: it names
/// another artifact, or ocifit did not create it (the apiserver's record of who created it,
/// not a label anyone writing policies could set).
pub(crate) fn foreign(
    existing: &ImageSelectionPolicy,
    wanted: &ImageSelectionPolicy,
) -> Option<String> {
    let name = existing.metadata.name.as_deref().unwrap_or_default();
    if existing.spec.artifact.reference != wanted.spec.artifact.reference
        || existing.spec.artifact.candidates.is_some()
    {
        return Some(format!(
            "ImageSelectionPolicy {name} exists and names another artifact"
        ));
    }
    let created_by_ocifit = existing
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .any(|entry| {
            entry.manager.as_deref() == Some(FIELD_MANAGER)
                && entry.operation.as_deref() == Some("Update")
                && entry.subresource.as_deref().unwrap_or_default().is_empty()
        });
    (!created_by_ocifit || !is_managed(existing)).then(|| {
        format!(
            "ImageSelectionPolicy {name} exists and was not created by ocifit for this artifact"
        )
    })
}

/// Whether `policy` is one ocifit took charge of.
pub(crate) fn is_managed(policy: &ImageSelectionPolicy) -> bool {
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

    #[test]
    fn a_name_is_128_bits_of_the_artifact_and_a_valid_label_value() {
        let name = managed_name("registry.example/app-compat:v1");
        let hex = name.strip_prefix(MANAGED_PREFIX).unwrap();
        assert_eq!(hex.len(), 32, "{name}");
        assert!(name.len() <= 63, "{name}");
    }

    #[test]
    fn the_policy_records_the_namespace_it_counts_against() {
        let pod = simple_pod(json!({"namespace": "team-a"}), json!({}));
        let policy = managed_policy(&pod, "r/a:v1").unwrap();
        assert_eq!(counted_against(&policy), Some("team-a"));
    }

    fn policy_for(namespace: &str, reference: &str) -> ImageSelectionPolicy {
        let pod = simple_pod(json!({"namespace": namespace}), json!({}));
        managed_policy(&pod, reference).unwrap()
    }

    #[test]
    fn quotas_count_per_namespace_and_in_all() {
        let quota = Quota {
            per_namespace: 2,
            global: 3,
        };
        let there: Vec<(String, Option<String>)> = vec![
            (managed_name("a"), Some("team-a".into())),
            (managed_name("b"), Some("team-a".into())),
        ];
        fn view(there: &[(String, Option<String>)]) -> Vec<(&str, Option<&str>)> {
            there
                .iter()
                .map(|(n, ns)| (n.as_str(), ns.as_deref()))
                .collect()
        }
        let full = room(view(&there), &policy_for("team-a", "c"), quota);
        assert!(
            matches!(&full, Room::Full(why) if why.contains("namespace team-a has caused 2")),
            "{full:?}"
        );
        assert_eq!(
            room(view(&there), &policy_for("team-a", "a"), quota),
            Room::Exists
        );
        assert_eq!(
            room(view(&there), &policy_for("team-b", "c"), quota),
            Room::Free
        );
        let mut more = there.clone();
        more.push((managed_name("c"), Some("team-b".into())));
        let full = room(view(&more), &policy_for("team-c", "d"), quota);
        assert!(
            matches!(&full, Room::Full(why) if why.contains("the cluster has 3")),
            "{full:?}"
        );
    }

    #[test]
    fn an_existing_policy_is_used_only_if_ocifit_created_it_for_the_artifact() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let wanted = policy_for("team-a", "r/a:v1");
        let entry =
            |manager: &str, operation: &str, subresource: Option<&str>| ManagedFieldsEntry {
                manager: Some(manager.into()),
                operation: Some(operation.into()),
                subresource: subresource.map(Into::into),
                ..ManagedFieldsEntry::default()
            };
        let mut created = wanted.clone();
        created.metadata.managed_fields = Some(vec![entry(FIELD_MANAGER, "Update", None)]);
        assert_eq!(foreign(&created, &wanted), None);
        let mut other_artifact = created.clone();
        other_artifact.spec.artifact.reference = Some("r/evil:v1".into());
        assert!(foreign(&other_artifact, &wanted).is_some());
        // Labelled managed by someone else; ocifit only wrote its status.
        let mut labelled = wanted.clone();
        labelled.metadata.managed_fields = Some(vec![
            entry("kubectl-create", "Update", None),
            entry(FIELD_MANAGER, "Apply", Some("status")),
        ]);
        assert!(foreign(&labelled, &wanted).is_some());
    }
}
