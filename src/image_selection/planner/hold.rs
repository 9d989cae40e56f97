//! Holding a pod ocifit cannot decide yet: admitted with ocifit's scheduling gate (the scheduler
//! leaves it alone) and the held label (the controller watches only such pods), nothing else.
//! Reinvoked on its own output it adds nothing. Pure.

use std::sync::Arc;

use json_patch::Patch;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::{DenyReason, ImagePlan};
use crate::admission::add;
use crate::api::ImageSelectionPolicy;
use crate::api::pod::{HELD_LABEL, SCHEDULING_GATE};
use crate::cluster::{Gate, held_at};

/// Image selection's scheduling gate, on every pod it holds (each carries the held label).
pub const GATE: Gate = Gate {
    name: SCHEDULING_GATE,
    label: HELD_LABEL,
};

/// The plan holding `pod` because of `reason` (one that waits).
pub(crate) fn hold(
    pod: &Pod,
    policy: Option<Arc<ImageSelectionPolicy>>,
    reason: DenyReason,
) -> ImagePlan {
    let mut ops = Vec::new();
    let gates = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref());
    if gate_at(pod).is_none() {
        let gate = json!({ "name": SCHEDULING_GATE });
        ops.push(match gates {
            None => add(&["spec", "schedulingGates"], Value::Array(vec![gate])),
            Some(_) => add(&["spec", "schedulingGates", "-"], gate),
        });
    }
    let labels = pod.metadata.labels.as_ref();
    if labels
        .and_then(|labels| labels.get(HELD_LABEL))
        .map(String::as_str)
        != Some("true")
    {
        ops.push(match labels {
            None => add(&["metadata", "labels"], json!({ HELD_LABEL: "true" })),
            Some(_) => add(&["metadata", "labels", HELD_LABEL], Value::from("true")),
        });
    }
    ImagePlan::Hold {
        policy,
        reason,
        patch: Patch(ops),
    }
}

/// The warning a held pod's creator sees.
pub(super) fn warning(reason: &DenyReason) -> String {
    format!("held by scheduling gate {SCHEDULING_GATE} until ocifit can choose its image: {reason}")
}

/// Where ocifit's gate is in the pod's scheduling gates, if there.
pub(crate) fn gate_at(pod: &Pod) -> Option<usize> {
    held_at(pod, GATE)
}
