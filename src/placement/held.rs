//! Which pods each replica watches ([`watched`]: labelled by admission and not yet released by
//! the controller, whose release labels the pod out of the watch), what it holds of them, and how
//! a decision reaches the live pod. Anyone who creates pods can set the label, with megabytes of
//! `args`, `env` or annotations, so the watch keeps only the fields placement reads ([`trim`]): of
//! a pod gated by ocifit, its identity, labels, owners, ocifit's own annotations and the
//! scheduling fields and container images the release planner reads; of any other (released by
//! hand, or never ocifit's), its identity and the policy it names. A trimmed object must never be written back whole (a
//! replace would be refused, or wipe what was trimmed), so a decision is sent as a merge patch of
//! what the plan changed, conditional on the resourceVersion it was planned from
//! ([`release_patch`]). Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::core::{Expression, ObjectMeta, Selector};
use serde_json::{Map, Value};

use crate::api::placement::pod::{POLICY_LABEL, RELEASED_LABEL, SCHEDULING_GATE};

/// The prefix of every annotation ocifit reads or writes on a placed pod.
pub const OWN_ANNOTATIONS: &str = "placement.ocifit.io/";

/// The kubelet's annotation on mirror pods (placement never selects them).
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The label selector of the watched pods: what a replica holds is bounded by the pods waiting
/// for the controller (and pods labelled by hand), never by the pods it released.
pub fn watched() -> Selector {
    Selector::from_iter([
        Expression::Exists(POLICY_LABEL.to_owned()),
        Expression::DoesNotExist(RELEASED_LABEL.to_owned()),
    ])
}

/// The label selector of the pods the controller released: the exec format error watch reads
/// their container statuses (and holds none of them).
pub fn released() -> Selector {
    Selector::from_iter([
        Expression::Exists(POLICY_LABEL.to_owned()),
        Expression::Exists(RELEASED_LABEL.to_owned()),
    ])
}

/// Keeps of `pod` only what placement reads (see the module's summary).
pub fn trim(pod: &mut Pod) {
    let Pod { metadata, spec, .. } = std::mem::take(pod);
    let gated = spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|gate| gate.name == SCHEDULING_GATE));
    let ObjectMeta {
        name,
        namespace,
        uid,
        resource_version,
        creation_timestamp,
        deletion_timestamp,
        labels,
        annotations,
        owner_references,
        ..
    } = metadata;
    let identity = ObjectMeta {
        name,
        namespace,
        uid,
        resource_version,
        creation_timestamp,
        deletion_timestamp,
        ..ObjectMeta::default()
    };
    if !gated {
        // Never reconciled again (a gate cannot be added after creation): the counts read its
        // policy, nothing else.
        let policy: BTreeMap<String, String> = labels
            .into_iter()
            .flatten()
            .filter(|(key, _)| key == POLICY_LABEL)
            .collect();
        pod.metadata = ObjectMeta {
            labels: Some(policy).filter(|labels| !labels.is_empty()),
            ..identity
        };
        return;
    }
    let annotations: BTreeMap<String, String> = annotations
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(OWN_ANNOTATIONS) || key == MIRROR_ANNOTATION)
        .collect();
    pod.metadata = ObjectMeta {
        labels,
        annotations: Some(annotations).filter(|annotations| !annotations.is_empty()),
        owner_references,
        ..identity
    };
    pod.spec = spec.map(|spec| PodSpec {
        containers: spec.containers.into_iter().map(image_only).collect(),
        init_containers: spec
            .init_containers
            .map(|containers| containers.into_iter().map(image_only).collect()),
        image_pull_secrets: spec.image_pull_secrets,
        service_account_name: spec.service_account_name,
        node_name: spec.node_name,
        node_selector: spec.node_selector,
        affinity: spec.affinity,
        tolerations: spec.tolerations,
        os: spec.os,
        scheduling_gates: spec.scheduling_gates,
        ..PodSpec::default()
    });
}

/// What inspection reads of a container.
fn image_only(container: Container) -> Container {
    Container {
        name: container.name,
        image: container.image,
        image_pull_policy: container.image_pull_policy,
        ..Container::default()
    }
}

/// The JSON merge patch that turns the live pod `stored` was trimmed from into `planned`: only
/// what the plan changed (its annotations, gates, affinity, tolerations), plus `stored`'s
/// resourceVersion, so the apiserver refuses it (409) if the pod changed since. `None` when the
/// plan changes nothing.
pub fn release_patch(stored: &Pod, planned: &Pod) -> Result<Option<Value>, serde_json::Error> {
    let before = serde_json::to_value(stored)?;
    let after = serde_json::to_value(planned)?;
    let Some(Value::Object(mut patch)) = merge_diff(&before, &after) else {
        return Ok(None);
    };
    let metadata = patch
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(metadata) = metadata {
        metadata.insert(
            "resourceVersion".to_owned(),
            stored
                .metadata
                .resource_version
                .clone()
                .map_or(Value::Null, Value::String),
        );
    }
    Ok(Some(Value::Object(patch)))
}

/// RFC 7396: the merge patch from `before` to `after` (objects member by member, anything else
/// whole, a member gone as `null`), `None` when they are equal.
fn merge_diff(before: &Value, after: &Value) -> Option<Value> {
    let (Value::Object(before), Value::Object(after)) = (before, after) else {
        return (before != after).then(|| after.clone());
    };
    let mut patch = Map::new();
    for (key, value) in after {
        let changed = match before.get(key) {
            Some(old) => merge_diff(old, value),
            None => Some(value.clone()),
        };
        if let Some(changed) = changed {
            patch.insert(key.clone(), changed);
        }
    }
    for key in before.keys().filter(|key| !after.contains_key(*key)) {
        patch.insert(key.clone(), Value::Null);
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

#[cfg(test)]
mod tests;
