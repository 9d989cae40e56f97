//! Which policy a pod asks for, and which image is its placeholder: by name (label, then
//! annotation), by the seed's image-ref annotation, or by a container using a policy's
//! targetImage. Owns only that choice and its denials; knows nothing of nodes or classes.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use kube::core::ObjectMeta;

use super::DenyReason;
use super::index::{Entry, Index};
use super::managed::{is_managed, pod_placeholder};
use crate::api::pod::{IMAGE_REF_ANNOTATION, POLICY, TARGET_IMAGE_ANNOTATION};

/// How the pod named its policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Via {
    /// The `…/policy` label.
    Label,
    /// The `…/policy` annotation.
    Annotation,
    /// The `…/image-ref` annotation.
    ImageRef,
    /// A container's image is the policy's targetImage.
    TargetImage,
}

impl Via {
    pub(super) fn describe(self) -> &'static str {
        match self {
            Via::Label => "named by label",
            Via::Annotation => "named by annotation",
            Via::ImageRef => "chosen by artifact",
            Via::TargetImage => "chosen by targetImage",
        }
    }
}

/// The policy the pod asks for.
#[derive(Debug, Clone)]
pub(super) struct Choice<'i> {
    pub(super) entry: &'i Entry,
    pub(super) via: Via,
    /// The image to replace: the pod's target-image override, else the policy's targetImage
    /// (a managed policy's: the pod's first container's image).
    pub(super) placeholder: String,
}

/// Chooses the pod's policy (see the planner's module documentation for the order).
pub(super) fn choose<'i>(
    index: &'i Index,
    meta: &ObjectMeta,
    spec: &PodSpec,
) -> Result<Choice<'i>, DenyReason> {
    let label = |key: &str| meta.labels.as_ref()?.get(key).map(String::as_str);
    let annotation = |key: &str| meta.annotations.as_ref()?.get(key).map(String::as_str);
    let override_ = annotation(TARGET_IMAGE_ANNOTATION).filter(|image| !image.is_empty());
    // A managed policy's targetImage came from the first pod that named its artifact: every
    // pod has its own placeholder replaced, never the one another tenant's pod chose.
    let placeholder = |entry: &Entry| {
        if is_managed(&entry.policy) {
            return pod_placeholder(meta, spec).cloned().unwrap_or_default();
        }
        override_
            .unwrap_or(&entry.policy.spec.target_image)
            .to_owned()
    };
    let named = match (label(POLICY), annotation(POLICY)) {
        (Some(name), _) => Some((name, Via::Label)),
        (None, Some(name)) => Some((name, Via::Annotation)),
        (None, None) => None,
    };
    if let Some((name, via)) = named {
        let entry = index
            .policies
            .get(name)
            .ok_or_else(|| DenyReason::PolicyNotFound {
                name: name.to_owned(),
                named_by: if via == Via::Label {
                    "label"
                } else {
                    "annotation"
                },
            })?;
        return Ok(Choice {
            entry,
            via,
            placeholder: placeholder(entry),
        });
    }
    if let Some(reference) = annotation(IMAGE_REF_ANNOTATION) {
        let entries: Vec<&Entry> = index
            .by_artifact
            .get(reference)
            .into_iter()
            .flatten()
            .filter_map(|name| index.policies.get(name))
            .collect();
        if entries.is_empty() {
            return Err(DenyReason::NoPolicyForImageRef {
                reference: reference.to_owned(),
            });
        }
        // A policy an admin wrote for the artifact wins over the one ocifit took charge of.
        let entries: Vec<&Entry> = if entries.iter().all(|e| is_managed(&e.policy)) {
            entries
        } else {
            entries
                .into_iter()
                .filter(|e| !is_managed(&e.policy))
                .collect()
        };
        let using: Vec<&Entry> = entries
            .iter()
            .copied()
            .filter(|entry| entries.len() == 1 || uses(spec, entry, &placeholder(entry)))
            .collect();
        return match using.as_slice() {
            [entry] => Ok(Choice {
                entry,
                via: Via::ImageRef,
                placeholder: placeholder(entry),
            }),
            _ => Err(ambiguous(&format!("artifact {reference:?}"), &entries)),
        };
    }
    // A managed policy's placeholder was chosen by a pod author: it serves pods naming its
    // artifact, never other pods that happen to use that image.
    let using: Vec<&Entry> = index
        .policies
        .values()
        .filter(|entry| !is_managed(&entry.policy))
        .filter(|entry| uses(spec, entry, &entry.policy.spec.target_image))
        .collect();
    match using.as_slice() {
        [entry] => Ok(Choice {
            entry,
            via: Via::TargetImage,
            placeholder: entry.policy.spec.target_image.clone(),
        }),
        [] => Err(DenyReason::NoPolicy),
        _ => Err(ambiguous("their targetImage", &using)),
    }
}

fn ambiguous(by: &str, entries: &[&Entry]) -> DenyReason {
    DenyReason::AmbiguousPolicy {
        policies: entries
            .iter()
            .map(|entry| entry.name().to_owned())
            .collect(),
        by: by.to_owned(),
    }
}

/// Whether a container the policy rewrites has `placeholder` as its image.
fn uses(spec: &PodSpec, entry: &Entry, placeholder: &str) -> bool {
    rewritten(spec, entry.policy.spec.include_init_containers)
        .any(|(_, container)| container.image.as_deref() == Some(placeholder))
}

/// Which list a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum List {
    /// `spec.containers`.
    Containers,
    /// `spec.initContainers`.
    InitContainers,
}

impl List {
    pub(super) fn field(self) -> &'static str {
        match self {
            List::Containers => "containers",
            List::InitContainers => "initContainers",
        }
    }
}

/// The containers a policy may rewrite, each with its list and index in it: every container,
/// and init containers when `init` is set; never ephemeral containers.
pub(super) fn rewritten(
    spec: &PodSpec,
    init: bool,
) -> impl Iterator<Item = ((List, usize), &Container)> {
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(at, c)| ((List::Containers, at), c));
    let inits = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .filter(move |_| init)
        .map(|(at, c)| ((List::InitContainers, at), c));
    inits.chain(containers)
}
