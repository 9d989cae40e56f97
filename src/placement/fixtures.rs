//! Builders shared by the placement tests: pods as the apiserver sends them, and policies.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::core::ObjectMeta;

use crate::api::{PlacementPolicy, PlacementPolicySpec};
use crate::placement::planner::Policy;
use crate::placement::planner::{Inspected, Inspection};
use crate::platform::Platform;

/// A pod in `default` with one container per `(name, image)`.
pub(crate) fn pod(containers: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            generate_name: Some("web-".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: containers
                .iter()
                .map(|(name, image)| Container {
                    name: (*name).into(),
                    image: Some((*image).into()),
                    ..Container::default()
                })
                .collect(),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// `gated` without what the gate adds (its gate, its labels, the first container's
/// termination message policy, checked to be the log fallback): equal to the pod as sent when
/// the gate changed nothing else.
pub(crate) fn without_the_gate(gated: &Pod) -> Pod {
    let mut without = gated.clone();
    without.metadata.labels = None;
    let spec = without.spec.as_mut().unwrap();
    spec.scheduling_gates = None;
    assert_eq!(
        spec.containers[0]
            .termination_message_policy
            .take()
            .as_deref(),
        Some("FallbackToLogsOnError")
    );
    without
}

/// `pod` with these labels.
pub(crate) fn labelled(mut pod: Pod, labels: &[(&str, &str)]) -> Pod {
    pod.metadata.labels = Some(map(labels));
    pod
}

pub(crate) fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A PlacementPolicy named `name` as stored, from a spec written as JSON.
pub(crate) fn stored_policy(name: &str, spec: serde_json::Value) -> PlacementPolicy {
    let spec: PlacementPolicySpec = serde_json::from_value(spec).unwrap();
    PlacementPolicy::new(name, spec)
}

/// A policy named `name` from a spec written as JSON, compiled.
pub(crate) fn policy(name: &str, spec: serde_json::Value) -> Policy {
    Policy::compile(&stored_policy(name, spec)).unwrap()
}

/// `os/arch[/variant]`.
pub(crate) fn platform(text: &str) -> Platform {
    text.parse().unwrap()
}

pub(crate) fn platforms(texts: &[&str]) -> Vec<Platform> {
    texts.iter().map(|t| platform(t)).collect()
}

/// The names of a pod's scheduling gates, in order.
pub(crate) fn gate_names(pod: &Pod) -> Vec<&str> {
    pod.spec
        .as_ref()
        .unwrap()
        .scheduling_gates
        .iter()
        .flatten()
        .map(|gate| gate.name.as_str())
        .collect()
}

/// A successful inspection of `container`'s image, listing the platforms `texts`.
pub(crate) fn inspected(container: &str, texts: &[&str]) -> Inspection {
    Inspection {
        container: container.into(),
        image: format!("registry.example.com/{container}:v1"),
        result: Ok(Inspected {
            digest: format!("sha256:{container}"),
            platforms: platforms(texts),
        }),
    }
}
