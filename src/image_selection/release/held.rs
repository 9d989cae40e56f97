//! What the release controller keeps of a pod carrying the held label. Anyone who creates pods
//! can set the label, with megabytes of `args`, `env` or annotations, so the watch keeps only
//! what the planner reads: identity, the pod contract's labels and annotations (and ocifit's),
//! owners, the container names and images, and the scheduling fields. The release is a JSON
//! patch of what changes, never the object written back whole. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::core::ObjectMeta;

use crate::api::pod::MIRROR_ANNOTATION;

/// Label and annotation prefixes the planner and the release read.
const READ_PREFIXES: [&str; 3] = [
    "oci.image.compatibilities.selection/",
    "ocifit.io/",
    "selection.ocifit.io/",
];

/// Keeps of `pod` only what the planner reads. A map the pod has stays (maybe emptied), so a
/// patch adds keys to it rather than writing it whole.
pub fn trim(pod: &mut Pod) {
    let Pod { metadata, spec, .. } = std::mem::take(pod);
    let read = |map: Option<BTreeMap<String, String>>| {
        map.map(|map| {
            map.into_iter()
                .filter(|(key, _)| {
                    key == MIRROR_ANNOTATION || READ_PREFIXES.iter().any(|p| key.starts_with(p))
                })
                .collect::<BTreeMap<_, _>>()
        })
    };
    pod.metadata = ObjectMeta {
        name: metadata.name,
        generate_name: metadata.generate_name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        creation_timestamp: metadata.creation_timestamp,
        deletion_timestamp: metadata.deletion_timestamp,
        labels: read(metadata.labels),
        annotations: read(metadata.annotations),
        owner_references: metadata.owner_references,
        ..ObjectMeta::default()
    };
    pod.spec = spec.map(|spec| PodSpec {
        containers: spec.containers.into_iter().map(image_only).collect(),
        init_containers: spec
            .init_containers
            .map(|containers| containers.into_iter().map(image_only).collect()),
        node_name: spec.node_name,
        node_selector: spec.node_selector,
        affinity: spec.affinity,
        scheduling_gates: spec.scheduling_gates,
        ..PodSpec::default()
    });
}

fn image_only(container: Container) -> Container {
    Container {
        name: container.name,
        image: container.image,
        ..Container::default()
    }
}
