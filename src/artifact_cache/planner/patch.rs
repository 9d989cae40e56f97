//! The JSON patch (RFC 6902) that applies a step's mutation to a pod, or to a Job's pod template,
//! exactly as the apiserver sent it: helpers first among the init containers, volumes and mounts
//! appended, the step's command replaced, the marker annotation and the step label added; a missing list or map is
//! added whole. Written straight as JSON text from the mutation's typed values. Knows nothing of
//! why.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;

use super::mutation::Mutation;
use crate::admission::{JsonText, WriteJson, WrittenPatch};
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
    fn spec(self) -> &'static [&'static str] {
        match self {
            Target::Pod { .. } => &["spec"],
            Target::Job { .. } => &["spec", "template", "spec"],
        }
    }

    fn metadata(self) -> &'static [&'static str] {
        match self {
            Target::Pod { .. } => &["metadata"],
            Target::Job { .. } => &["spec", "template", "metadata"],
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
) -> WrittenPatch {
    let mut patch = WrittenPatch::default();
    let at = target.spec();
    match &spec.init_containers {
        None => patch.add(&[at, &["initContainers"]], &mutation.init_containers),
        Some(_) => {
            for (i, container) in mutation.init_containers.iter().enumerate() {
                patch.add(&[at, &["initContainers", &i.to_string()]], container);
            }
        }
    }
    append(
        &mut patch,
        &[at, &["volumes"]],
        spec.volumes.is_some(),
        &mutation.volumes,
    );
    let has_mounts = spec
        .containers
        .get(mutation.step)
        .is_some_and(|c| c.volume_mounts.is_some());
    let step = mutation.step.to_string();
    append(
        &mut patch,
        &[at, &["containers", &step, "volumeMounts"]],
        has_mounts,
        &mutation.mounts,
    );
    if let Some(policy) = &mutation.restart_policy {
        patch.add(&[at, &["restartPolicy"]], policy);
    }
    if let Some(command) = &mutation.command {
        patch.add(&[at, &["containers", &step, "command"]], command);
    }
    if held {
        append(
            &mut patch,
            &[at, &["schedulingGates"]],
            spec.scheduling_gates.is_some(),
            &[SchedulingGate],
        );
    }
    mark(&mut patch, &mutation.marker, annotations, target, held);
    patch
}

/// The cache's scheduling gate.
struct SchedulingGate;

impl WriteJson for SchedulingGate {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.raw(r#"{"name":"#);
        out.string(step::CACHE_GATE);
        out.raw("}");
    }
}

/// Metadata of annotations and, when given, labels: what a pod template without metadata gains.
struct Metadata<'a> {
    annotations: &'a BTreeMap<&'a str, &'a str>,
    labels: Option<&'a BTreeMap<&'a str, &'a str>>,
}

impl WriteJson for Metadata<'_> {
    fn write_json(&self, out: &mut JsonText<'_>) {
        out.raw(r#"{"annotations":"#);
        self.annotations.write_json(out);
        if let Some(labels) = self.labels {
            out.raw(r#","labels":"#);
            labels.write_json(out);
        }
        out.raw("}");
    }
}

/// Adds the marker annotation and the step label (and, held, the held label) to the pod's (or
/// the template's) metadata, adding the maps the object lacks.
fn mark(
    patch: &mut WrittenPatch,
    marker: &str,
    annotations: &BTreeMap<String, String>,
    target: Target,
    held: bool,
) {
    let metadata = target.metadata();
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
        let whole = Metadata {
            annotations: &marker_annotation,
            labels: Some(&step_label),
        };
        return patch.add(&[metadata], &whole);
    }
    if has_labels {
        for (key, value) in &step_label {
            patch.add(&[metadata, &["labels", key]], value);
        }
    } else {
        patch.add(&[metadata, &["labels"]], &step_label);
    }
    if annotations.is_empty() {
        patch.add(&[metadata, &["annotations"]], &marker_annotation);
    } else {
        patch.add(&[metadata, &["annotations", step::INJECTED]], marker);
    }
}

/// The patch that defers a Job's injection to its pods: the Job's contract annotations copied
/// onto its pod template, so each pod the Job makes is a step of its own, planned when it is
/// created (its cache may be Ready by then, or wired and the pod held).
pub(super) fn defer(
    contract: &BTreeMap<String, String>,
    template_annotations: &BTreeMap<String, String>,
    has_template_metadata: bool,
) -> WrittenPatch {
    let mut patch = WrittenPatch::default();
    let copied: BTreeMap<&str, &str> = contract
        .iter()
        .filter(|(key, _)| key.starts_with(step::PREFIX))
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    const TEMPLATE: &[&str] = &["spec", "template", "metadata"];
    if !has_template_metadata {
        let whole = Metadata {
            annotations: &copied,
            labels: None,
        };
        patch.add(&[TEMPLATE], &whole);
    } else if template_annotations.is_empty() {
        patch.add(&[TEMPLATE, &["annotations"]], &copied);
    } else {
        for (key, value) in &copied {
            patch.add(&[TEMPLATE, &["annotations", key]], value);
        }
    }
    patch
}

/// Appends items to a list, or adds the list when the object has none.
fn append<T: WriteJson>(patch: &mut WrittenPatch, path: &[&[&str]], exists: bool, items: &[T]) {
    if items.is_empty() {
        return;
    }
    if !exists {
        return patch.add(path, items);
    }
    let mut at = path.to_vec();
    at.push(&["-"]);
    for item in items {
        patch.add(&at, item);
    }
}
