//! The edits a release plan makes to the pod: the gate removed, the narrowed affinity, the
//! preferences and tolerations appended (never repeated, so a second pass adds nothing), and the
//! decision annotations. Only fields the apiserver lets a gated pod change are touched.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelectorRequirement, NodeSelectorTerm, Pod, PreferredSchedulingTerm, Toleration,
};

use super::{Inspection, ReleaseInputs};
use crate::api::placement_pod::{
    DIGESTS_ANNOTATION, MESSAGE_ANNOTATION, OUTCOME_ANNOTATION, Outcome, PLATFORMS_ANNOTATION,
    RELEASED_LABEL, SCHEDULING_GATE, TAINT_KEY,
};
use crate::classes::ARCH_LABEL;

/// Removes ocifit's scheduling gate, keeping any other, and labels the pod released (which
/// takes it out of every replica's watch).
pub(super) fn release(pod: &mut Pod) {
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(RELEASED_LABEL.to_owned(), "true".to_owned());
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if let Some(gates) = spec.scheduling_gates.as_mut() {
        gates.retain(|gate| gate.name != SCHEDULING_GATE);
        if gates.is_empty() {
            spec.scheduling_gates = None;
        }
    }
}

/// Sets the narrowed affinity, and for each of `architectures` its preferred term and
/// tolerations (plus the node-tainting toleration where ocifit taints that architecture).
pub(super) fn constrain(
    pod: &mut Pod,
    mut affinity: Affinity,
    architectures: &BTreeSet<&str>,
    context: ReleaseInputs<'_>,
) {
    let node_affinity = affinity.node_affinity.get_or_insert_default();
    let preferred = node_affinity
        .preferred_during_scheduling_ignored_during_execution
        .get_or_insert_default();
    let mut tolerations: Vec<Toleration> = Vec::new();
    for architecture in architectures {
        let settings = context.policy.architectures.get(*architecture);
        if let Some(weight) = settings.and_then(|settings| settings.weight) {
            push_new(preferred, preference(architecture, weight));
        }
        for toleration in settings.iter().flat_map(|s| s.tolerations.iter()) {
            push_new(&mut tolerations, toleration.clone());
        }
        if context.tainted.contains(*architecture) {
            push_new(&mut tolerations, taint_toleration(architecture));
        }
    }
    if preferred.is_empty() {
        node_affinity.preferred_during_scheduling_ignored_during_execution = None;
    }
    let spec = pod.spec.get_or_insert_default();
    spec.affinity = Some(affinity);
    if !tolerations.is_empty() {
        let present = spec.tolerations.get_or_insert_default();
        for toleration in tolerations {
            push_new(present, toleration);
        }
    }
}

/// Writes the decision annotations.
pub(super) fn decision(
    pod: &mut Pod,
    outcome: Outcome,
    platforms: Option<&str>,
    inspections: &[Inspection],
    message: &str,
) {
    let digests: BTreeMap<&str, &str> = inspections
        .iter()
        .filter_map(|inspection| {
            let inspected = inspection.result.as_ref().ok()?;
            Some((inspection.container.as_str(), inspected.digest.as_str()))
        })
        .collect();
    annotate(pod, OUTCOME_ANNOTATION, outcome.as_str());
    annotate(pod, MESSAGE_ANNOTATION, message);
    if let Some(platforms) = platforms {
        annotate(pod, PLATFORMS_ANNOTATION, platforms);
    }
    if !digests.is_empty() {
        // A map of strings always serializes.
        let json = serde_json::to_string(&digests).unwrap_or_default();
        annotate(pod, DIGESTS_ANNOTATION, &json);
    }
}

/// Sets one annotation.
pub(super) fn annotate(pod: &mut Pod, key: &str, value: &str) {
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(key.to_owned(), value.to_owned());
}

fn preference(architecture: &str, weight: i32) -> PreferredSchedulingTerm {
    PreferredSchedulingTerm {
        weight,
        preference: NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: ARCH_LABEL.to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![architecture.to_owned()]),
            }]),
            match_fields: None,
        },
    }
}

fn taint_toleration(architecture: &str) -> Toleration {
    Toleration {
        key: Some(TAINT_KEY.to_owned()),
        operator: Some("Equal".to_owned()),
        value: Some(architecture.to_owned()),
        effect: Some("NoSchedule".to_owned()),
        toleration_seconds: None,
    }
}

fn push_new<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}
