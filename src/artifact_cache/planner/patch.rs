//! The JSON patch (RFC 6902) that applies a step's mutation to a pod, or to a Job's pod template,
//! exactly as the apiserver sent it: helpers first among the init containers, volumes and mounts
//! appended, the step's command replaced, the marker annotation and the step label added; a missing list or map is
//! added whole. Knows nothing of why.

use std::collections::BTreeMap;

use json_patch::{Patch, PatchOperation};
use k8s_openapi::api::core::v1::PodSpec;
use serde_json::Value;

use super::mutation::Mutation;
use crate::admission::patch::add;
use crate::api::step;

/// Where the pod spec and its annotations are in the object patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
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

/// The patch; the mutation's containers, volumes and mounts are moved into it as written.
pub fn build(
    mutation: Mutation,
    spec: &PodSpec,
    annotations: &BTreeMap<String, String>,
    target: Target,
) -> Result<Patch, serde_json::Error> {
    let Mutation {
        init_containers,
        volumes,
        step,
        mounts,
        command,
        restart_policy,
        marker,
        ..
    } = mutation;
    let mut ops = Vec::new();
    let spec_path = target.spec();
    let at = |rest: &[&str]| -> Vec<String> {
        spec_path
            .iter()
            .map(|s| (*s).to_string())
            .chain(rest.iter().map(|s| (*s).to_string()))
            .collect()
    };
    match &spec.init_containers {
        None => ops.push(add(&at(&["initContainers"]), Value::Array(init_containers))),
        Some(_) => {
            for (i, container) in init_containers.into_iter().enumerate() {
                ops.push(add(&at(&["initContainers", &i.to_string()]), container));
            }
        }
    }
    append(&mut ops, &at(&["volumes"]), spec.volumes.is_some(), volumes);
    let has_mounts = spec
        .containers
        .get(step)
        .is_some_and(|c| c.volume_mounts.is_some());
    let step = step.to_string();
    append(
        &mut ops,
        &at(&["containers", &step, "volumeMounts"]),
        has_mounts,
        mounts,
    );
    if let Some(policy) = restart_policy {
        ops.push(add(&at(&["restartPolicy"]), Value::from(policy)));
    }
    if let Some(command) = &command {
        ops.push(add(
            &at(&["containers", &step, "command"]),
            serde_json::to_value(command)?,
        ));
    }
    let metadata: Vec<String> = target.metadata().iter().map(|s| (*s).to_string()).collect();
    let marker = Value::from(marker);
    let (has_metadata, has_labels) = match target {
        Target::Pod { has_labels } => (true, has_labels),
        Target::Job {
            has_template_metadata,
            has_template_labels,
        } => (has_template_metadata, has_template_labels),
    };
    if !has_metadata {
        ops.push(add(
            &metadata,
            serde_json::json!({
                "annotations": {step::INJECTED: marker},
                "labels": {step::STEP_LABEL: step::STEP_LABEL_VALUE},
            }),
        ));
        return Ok(Patch(ops));
    }
    let mut labels = metadata.clone();
    labels.push("labels".into());
    if has_labels {
        labels.push(step::STEP_LABEL.into());
        ops.push(add(&labels, Value::from(step::STEP_LABEL_VALUE)));
    } else {
        ops.push(add(
            &labels,
            serde_json::json!({step::STEP_LABEL: step::STEP_LABEL_VALUE}),
        ));
    }
    if annotations.is_empty() {
        let mut path = metadata;
        path.push("annotations".into());
        ops.push(add(&path, serde_json::json!({step::INJECTED: marker})));
    } else {
        let mut path = metadata;
        path.extend(["annotations".into(), step::INJECTED.into()]);
        ops.push(add(&path, marker));
    }
    Ok(Patch(ops))
}

/// Appends items to a list, or adds the list when the object has none.
fn append(ops: &mut Vec<PatchOperation>, path: &[String], exists: bool, items: Vec<Value>) {
    if items.is_empty() {
        return;
    }
    if !exists {
        ops.push(add(path, Value::Array(items)));
        return;
    }
    for item in items {
        let mut at = path.to_vec();
        at.push("-".into());
        ops.push(add(&at, item));
    }
}
