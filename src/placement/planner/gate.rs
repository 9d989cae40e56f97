//! The gate planner: what admission does to a pod. A selected pod gets the scheduling gate and
//! the tracking label naming its policy, loses the released label if it came with one, and its
//! containers left at the `File` termination message policy get `FallbackToLogsOnError` (so an
//! `exec format error`, which runc writes only to the log, reaches the container's status where
//! the controller reads it), and nothing else, as a JSON patch against the pod as the
//! apiserver sent it. Reinvoked on its own output it plans nothing; excluded and unselected pods
//! are left untouched.

use json_patch::Patch;
use serde_json::Value;

use super::pod_view::PodView;
use super::select::{Exclusion, Selection};
use crate::admission::{add_op, remove_op};
use crate::api::placement_pod::{POLICY_LABEL, RELEASED_LABEL, SCHEDULING_GATE};

/// The termination message policy the gate gives containers left at `File`.
pub(super) const LOG_FALLBACK: &str = "FallbackToLogsOnError";

/// What admission does with a pod.
#[derive(Debug, Clone, PartialEq)]
pub enum GatePlan {
    Leave(Leave),
    /// Apply `patch`, which gates the pod for `policy`.
    Gate {
        policy: String,
        patch: Patch,
    },
}

/// Why a pod is left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// Never selected.
    Excluded(Exclusion),
    /// No policy selects it.
    Unselected,
    /// It already carries the gate and the label (reinvocation, or a pod created so).
    AlreadyGated,
}

/// Plans admission for `pod` given its [`Selection`].
pub(crate) fn plan_gate<'a>(pod: impl Into<PodView<'a>>, selection: Selection<'_>) -> GatePlan {
    let pod = pod.into();
    let policy = match selection {
        Selection::Excluded(exclusion) => return GatePlan::Leave(Leave::Excluded(exclusion)),
        Selection::Unselected => return GatePlan::Leave(Leave::Unselected),
        Selection::Selected(policy) => &policy.name,
    };
    let gates = pod.scheduling_gates;
    let gated = gates
        .iter()
        .flat_map(|gates| gates.iter())
        .any(|gate| gate.name == SCHEDULING_GATE);
    let labels = pod.metadata.labels.as_ref();
    let label = labels.and_then(|labels| labels.get(POLICY_LABEL));
    let mut ops = Vec::new();
    if !gated {
        let gate = serde_json::json!({ "name": SCHEDULING_GATE });
        ops.push(match gates {
            None => add_op(&["spec", "schedulingGates"], Value::Array(vec![gate])),
            Some(_) => add_op(&["spec", "schedulingGates", "-"], gate),
        });
    }
    // A gate already there keeps the policy that put it there; a new gate names the winner now.
    let relabel = if gated {
        label.is_none()
    } else {
        label != Some(policy)
    };
    if relabel {
        ops.push(match labels {
            None => add_op(
                &["metadata", "labels"],
                serde_json::json!({ POLICY_LABEL: policy }),
            ),
            Some(_) => add_op(
                &["metadata", "labels", POLICY_LABEL],
                Value::from(policy.as_str()),
            ),
        });
    }
    // A copy of a released pod carries the released label, which would keep the gated copy out
    // of the controller's watch, and the pod never released.
    if labels.is_some_and(|labels| labels.contains_key(RELEASED_LABEL)) {
        ops.push(remove_op(&["metadata", "labels", RELEASED_LABEL]));
    }
    for (list, index) in pod.containers.leaving_file() {
        let index = index.to_string();
        ops.push(add_op(
            &["spec", list, index.as_str(), "terminationMessagePolicy"],
            Value::from(LOG_FALLBACK),
        ));
    }
    if ops.is_empty() {
        return GatePlan::Leave(Leave::AlreadyGated);
    }
    GatePlan::Gate {
        policy: policy.clone(),
        patch: Patch(ops),
    }
}

#[cfg(test)]
mod tests;
