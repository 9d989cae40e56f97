//! The JSON patch (RFC 6902) that applies a decision to the pod exactly as the apiserver sent
//! it: only what changes is written, a missing parent (`/metadata/annotations`, `/spec/affinity`,
//! `…/nodeAffinity`) is added before anything under it, and pointer tokens are escaped
//! (`ocifit.io/policy` → `ocifit.io~1policy`) by `jsonptr`. Knows nothing of how the decision
//! was made.

use std::collections::BTreeMap;

use json_patch::{Patch, PatchOperation};
use k8s_openapi::api::core::v1::{Affinity, Pod};
use serde_json::Value;

use super::policy_choice::List;
use crate::admission::{add_op, replace_op};

const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";

/// The patch giving `image` to the `containers`, setting `affinity` (the pod's new
/// `spec.affinity` when pinned) and writing `annotations` and `label` (key, value).
pub(super) fn build(
    pod: &Pod,
    containers: &[(List, usize)],
    image: &str,
    affinity: Option<&Affinity>,
    annotations: &BTreeMap<String, String>,
    label: Option<(&str, &str)>,
) -> Result<Patch, serde_json::Error> {
    let mut ops = Vec::new();
    for (list, at) in containers {
        ops.push(replace_op(
            &["spec", list.field(), &at.to_string(), "image"],
            Value::from(image),
        ));
    }
    if let Some(pinned) = affinity {
        affinity_ops(pod, pinned, &mut ops)?;
    }
    if let Some((key, value)) = label {
        let labels = pod.metadata.labels.as_ref();
        if labels
            .and_then(|labels| labels.get(key))
            .map(String::as_str)
            != Some(value)
        {
            ops.push(match labels {
                None => add_op(&["metadata", "labels"], serde_json::json!({ key: value })),
                Some(_) => add_op(&["metadata", "labels", key], Value::from(value)),
            });
        }
    }
    match &pod.metadata.annotations {
        None => ops.push(add_op(
            &["metadata", "annotations"],
            serde_json::to_value(annotations)?,
        )),
        Some(present) => {
            for (key, value) in annotations {
                if present.get(key) != Some(value) {
                    ops.push(add_op(
                        &["metadata", "annotations", key],
                        Value::from(value.as_str()),
                    ));
                }
            }
        }
    }
    Ok(Patch(ops))
}

/// Writes the pinned required node affinity at the shallowest level the pod lacks.
fn affinity_ops(
    pod: &Pod,
    pinned: &Affinity,
    ops: &mut Vec<PatchOperation>,
) -> Result<(), serde_json::Error> {
    let present = pod.spec.as_ref().and_then(|spec| spec.affinity.as_ref());
    let Some(present) = present else {
        ops.push(add_op(&["spec", "affinity"], serde_json::to_value(pinned)?));
        return Ok(());
    };
    let Some(node_affinity) = &pinned.node_affinity else {
        return Ok(());
    };
    let Some(present) = &present.node_affinity else {
        ops.push(add_op(
            &["spec", "affinity", "nodeAffinity"],
            serde_json::to_value(node_affinity)?,
        ));
        return Ok(());
    };
    let wanted = &node_affinity.required_during_scheduling_ignored_during_execution;
    let had = &present.required_during_scheduling_ignored_during_execution;
    if let Some(wanted) = wanted.as_ref().filter(|_| wanted != had) {
        let path = ["spec", "affinity", "nodeAffinity", REQUIRED];
        let value = serde_json::to_value(wanted)?;
        ops.push(if had.is_some() {
            replace_op(&path, value)
        } else {
            add_op(&path, value)
        });
    }
    Ok(())
}
