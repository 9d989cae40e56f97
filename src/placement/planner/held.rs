//! Which pods each replica watches ([`watched`]: labelled by admission, not yet released), what it
//! holds of them, and how a decision reaches the live pod. Anyone who creates pods can set the
//! label with megabytes of `args`, `env` or annotations, so the watch keeps only what placement
//! reads ([`trim`]): of a pod ocifit gated, its identity, labels, owners, ocifit's annotations, and
//! the scheduling fields and images the release planner reads; of any other, its identity and
//! policy. A trimmed object is never written back whole, so a decision is the shared floor's
//! guarded JSON patch of what the plan changed ([`release_patch`]). Pure.

use json_patch::Patch;
use k8s_openapi::api::core::v1::Pod;
use kube::core::{Expression, Selector};

use crate::api::placement_pod::{POLICY_LABEL, RELEASED_LABEL, SCHEDULING_GATE};
use crate::cluster::{Kept, Keys, Spec, changes, guarded};

/// The prefix of every annotation ocifit reads or writes on a placed pod.
pub(super) const OWN_ANNOTATIONS: &str = "placement.ocifit.io/";

/// The kubelet's annotation on mirror pods (placement never selects them).
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The label selector of the watched pods: what a replica holds is bounded by the pods waiting
/// for the controller (and pods labelled by hand), never by the pods it released.
pub(crate) fn held_selector() -> Selector {
    Selector::from_iter([
        Expression::Exists(POLICY_LABEL.to_owned()),
        Expression::DoesNotExist(RELEASED_LABEL.to_owned()),
    ])
}

/// What the watch keeps of a pod gated by ocifit: every label (policies select pods by them),
/// ocifit's own annotations and what the release planner reads of the spec.
const GATED: Kept = Kept {
    labels: Keys::All,
    annotations: Keys::Prefixed(&[OWN_ANNOTATIONS, MIRROR_ANNOTATION]),
    spec: Spec::Inspection,
};

/// What it keeps of any other pod (a gate cannot be added after creation, so it is never
/// reconciled again): the policy it counts for.
const UNGATED: Kept = Kept {
    labels: Keys::Prefixed(&[POLICY_LABEL]),
    annotations: Keys::Nothing,
    spec: Spec::Dropped,
};

/// The label selector of the pods the controller released: the exec format error watch reads
/// their container statuses (and holds none of them).
pub(crate) fn released() -> Selector {
    Selector::from_iter([
        Expression::Exists(POLICY_LABEL.to_owned()),
        Expression::Exists(RELEASED_LABEL.to_owned()),
    ])
}

/// Keeps of `pod` only what placement reads (see the module's summary).
pub(crate) fn trim_held(pod: &mut Pod) {
    let gated = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|gate| gate.name == SCHEDULING_GATE));
    crate::cluster::trim(pod, if gated { &GATED } else { &UNGATED });
}

/// The guarded release patch turning the live pod `stored` was trimmed from into `planned`: only
/// what the plan changed, pinned to `stored`'s resourceVersion so the apiserver refuses it (409)
/// if the pod changed since. `None` when the plan changes nothing.
pub(crate) fn release_patch(
    stored: &Pod,
    planned: &Pod,
) -> Result<Option<Patch>, serde_json::Error> {
    let changes = changes(stored, planned)?;
    Ok((!changes.is_empty()).then(|| guarded(stored, changes)))
}

#[cfg(test)]
mod tests;
