//! The JSON patch (RFC 6902) that applies a step's mutation to a pod, or to a Job's pod template,
//! exactly as the apiserver sent it: helpers first among the init containers, volumes and mounts
//! appended, the step's command replaced, the marker annotation and the step label added; a missing list or map is
//! added whole. Written straight as JSON text from the mutation's typed values. Knows nothing of
//! why.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use serde::Serialize;

use super::mutation::Mutation;
use crate::admission::WrittenPatch;
use crate::api::step;

/// Where the pod spec and its annotations are in the object patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// A pod: `/spec`, `/metadata/annotations`, `/metadata/labels`.
    Pod { has_labels: bool },
    /// A Job: `/spec/template/spec`, `/spec/template/metadata/annotations` and `labels`.
    Job {
        has_template_metadata: bool,
        has_template_labels: bool,
    },
}

impl Target {
    fn spec(self) -> Vec<&'static str> {
        match self {
            Target::Pod { .. } => vec!["spec"],
            Target::Job { .. } => vec!["spec", "template", "spec"],
        }
    }

    fn metadata(self) -> Vec<&'static str> {
        match self {
            Target::Pod { .. } => vec!["metadata"],
            Target::Job { .. } => vec!["spec", "template", "metadata"],
        }
    }
}

/// The patch, written from the mutation's containers, volumes and mounts; `held` adds the cache's
/// scheduling gate and the held label (the cache is not Ready yet).
pub(super) fn build(
    mutation: &Mutation<'_>,
    spec: &PodSpec,
    annotations: &BTreeMap<String, String>,
    target: Target,
    held: bool,
) -> Result<WrittenPatch, serde_json::Error> {
    let mut patch = WrittenPatch::default();
    let spec_path = target.spec();
    let at = |rest: &[&str]| -> Vec<String> {
        spec_path
            .iter()
            .chain(rest)
            .map(|s| (*s).to_string())
            .collect()
    };
    match &spec.init_containers {
        None => patch.add(&at(&["initContainers"]), &mutation.init_containers)?,
        Some(_) => {
            for (i, container) in mutation.init_containers.iter().enumerate() {
                patch.add(&at(&["initContainers", &i.to_string()]), container)?;
            }
        }
    }
    append(
        &mut patch,
        &at(&["volumes"]),
        spec.volumes.is_some(),
        &mutation.volumes,
    )?;
    let has_mounts = spec
        .containers
        .get(mutation.step)
        .is_some_and(|c| c.volume_mounts.is_some());
    let step = mutation.step.to_string();
    append(
        &mut patch,
        &at(&["containers", &step, "volumeMounts"]),
        has_mounts,
        &mutation.mounts,
    )?;
    if let Some(policy) = &mutation.restart_policy {
        patch.add(&at(&["restartPolicy"]), policy)?;
    }
    if let Some(command) = &mutation.command {
        patch.add(&at(&["containers", &step, "command"]), command)?;
    }
    if held {
        #[derive(Serialize)]
        struct SchedulingGate {
            name: &'static str,
        }
        let gate = SchedulingGate {
            name: step::CACHE_GATE,
        };
        append(
            &mut patch,
            &at(&["schedulingGates"]),
            spec.scheduling_gates.is_some(),
            &[gate],
        )?;
    }
    mark(&mut patch, &mutation.marker, annotations, target, held)?;
    Ok(patch)
}

/// Adds the marker annotation and the step label (and, held, the held label) to the pod's (or
/// the template's) metadata, adding the maps the object lacks.
fn mark(
    patch: &mut WrittenPatch,
    marker: &str,
    annotations: &BTreeMap<String, String>,
    target: Target,
    held: bool,
) -> Result<(), serde_json::Error> {
    let metadata: Vec<String> = target.metadata().iter().map(|s| (*s).to_string()).collect();
    let (has_metadata, has_labels) = match target {
        Target::Pod { has_labels } => (true, has_labels),
        Target::Job {
            has_template_metadata,
            has_template_labels,
        } => (has_template_metadata, has_template_labels),
    };
    let mut step_label = BTreeMap::from([(step::STEP_LABEL, step::STEP_LABEL_VALUE)]);
    if held {
        step_label.insert(step::HELD_LABEL, "true");
    }
    let marker_annotation = BTreeMap::from([(step::INJECTED, marker)]);
    if !has_metadata {
        #[derive(Serialize)]
        struct Metadata<'a> {
            annotations: &'a BTreeMap<&'a str, &'a str>,
            labels: &'a BTreeMap<&'a str, &'a str>,
        }
        let whole = Metadata {
            annotations: &marker_annotation,
            labels: &step_label,
        };
        return patch.add(&metadata, &whole);
    }
    let mut labels = metadata.clone();
    labels.push("labels".into());
    if has_labels {
        for (key, value) in &step_label {
            let mut label = labels.clone();
            label.push((*key).into());
            patch.add(&label, value)?;
        }
    } else {
        patch.add(&labels, &step_label)?;
    }
    let mut path = metadata;
    path.push("annotations".into());
    if annotations.is_empty() {
        patch.add(&path, &marker_annotation)?;
    } else {
        path.push(step::INJECTED.into());
        patch.add(&path, marker)?;
    }
    Ok(())
}

/// The patch that defers a Job's injection to its pods: the Job's contract annotations copied
/// onto its pod template, so each pod the Job makes is a step of its own, planned when it is
/// created (its cache may be Ready by then, or wired and the pod held).
pub(super) fn defer(
    contract: &BTreeMap<String, String>,
    template_annotations: &BTreeMap<String, String>,
    has_template_metadata: bool,
) -> Result<WrittenPatch, serde_json::Error> {
    let mut patch = WrittenPatch::default();
    let copied: BTreeMap<&str, &str> = contract
        .iter()
        .filter(|(key, _)| key.starts_with(step::PREFIX))
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    if !has_template_metadata {
        #[derive(Serialize)]
        struct Metadata<'a> {
            annotations: &'a BTreeMap<&'a str, &'a str>,
        }
        patch.add(
            &["spec", "template", "metadata"],
            &Metadata {
                annotations: &copied,
            },
        )?;
    } else if template_annotations.is_empty() {
        patch.add(&["spec", "template", "metadata", "annotations"], &copied)?;
    } else {
        for (key, value) in &copied {
            patch.add(&["spec", "template", "metadata", "annotations", key], value)?;
        }
    }
    Ok(patch)
}

/// Appends items to a list, or adds the list when the object has none.
fn append<T: Serialize>(
    patch: &mut WrittenPatch,
    path: &[String],
    exists: bool,
    items: &[T],
) -> Result<(), serde_json::Error> {
    if items.is_empty() {
        return Ok(());
    }
    if !exists {
        return patch.add(path, items);
    }
    let mut at = path.to_vec();
    at.push("-".into());
    for item in items {
        patch.add(&at, item)?;
    }
    Ok(())
}
