//! A pod as image selection reads it from a review: what the planner reads and nothing else —
//! its identity, labels, annotations and owners, the containers' and init containers' names and
//! images, and the scheduling fields (`nodeName`, `nodeSelector`, `affinity`,
//! `schedulingGates`). These are the fields the held-pod watch keeps of a pod it releases with the
//! same planner (`release::held::trim`), so admission and
//! release decide from the same fields. The rest is skipped unread, never built
//! (docs/performance.md says what a whole `Pod` costs); the apiserver validates it after admission.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Container, Pod, PodSchedulingGate, PodSpec};
use serde::Deserialize;

use crate::admission::{ReadMetadata, read_as};

/// A review's pod, holding only what the planner reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Read")]
pub struct SelectionPod(pub Pod);

#[derive(Default, Deserialize)]
#[serde(default)]
struct Read {
    metadata: Option<ReadMetadata>,
    spec: Option<Spec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    containers: Vec<ImageOnly>,
    #[serde(default)]
    init_containers: Option<Vec<ImageOnly>>,
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    node_selector: Option<BTreeMap<String, String>>,
    #[serde(default)]
    affinity: Option<Affinity>,
    #[serde(default)]
    scheduling_gates: Option<Vec<PodSchedulingGate>>,
}

/// A container's name and image.
#[derive(Deserialize)]
struct ImageOnly {
    #[serde(default)]
    name: String,
    #[serde(default)]
    image: Option<String>,
}

impl From<ImageOnly> for Container {
    fn from(read: ImageOnly) -> Self {
        Container {
            name: read.name,
            image: read.image,
            ..Container::default()
        }
    }
}

impl From<Read> for SelectionPod {
    fn from(read: Read) -> Self {
        SelectionPod(Pod {
            metadata: read.metadata.unwrap_or_default().into(),
            spec: read.spec.map(|spec| PodSpec {
                containers: spec.containers.into_iter().map(Container::from).collect(),
                init_containers: spec
                    .init_containers
                    .map(|containers| containers.into_iter().map(Container::from).collect()),
                node_name: spec.node_name,
                node_selector: spec.node_selector,
                affinity: spec.affinity,
                scheduling_gates: spec.scheduling_gates,
                ..PodSpec::default()
            }),
            status: None,
        })
    }
}

read_as!(SelectionPod, Pod, 0.metadata);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::image_selection::release::trim;

    /// A pod with every field the planner reads, labels and annotations of the pod contract
    /// only (the held watch keeps no others), and much it does not read.
    fn pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "generateName": "web-", "namespace": "shop", "uid": "u",
                "resourceVersion": "7", "creationTimestamp": "2026-11-26T10:00:00Z",
                "labels": {"oci.image.compatibilities.selection/enabled": "true"},
                "annotations": {"oci.image.compatibilities.selection/image-ref": "r/a:1"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "o", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {
                "nodeSelector": {"zone": "a"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}},
                "schedulingGates": [{"name": "g"}],
                "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
                "containers": [{"name": "app", "image": "placeholder:latest",
                                "env": [{"name": "A", "value": "1"}], "resources": {"limits": {"cpu": "1"}}}],
                "tolerations": [{"key": "t", "operator": "Exists"}]
            },
            "status": {"phase": "Pending"}
        })
    }

    #[test]
    fn a_review_pod_is_read_as_the_held_watch_keeps_a_pod() {
        let read: SelectionPod = serde_json::from_value(pod()).unwrap();
        let mut kept: Pod = serde_json::from_value(pod()).unwrap();
        trim(&mut kept);
        assert_eq!(read.0, kept);
    }

    #[test]
    fn absent_and_null_members_read_as_absent() {
        for pod in [
            json!({}),
            json!({"metadata": null, "spec": null}),
            json!({"spec": {"containers": [{"name": "a", "image": null}], "affinity": null}}),
        ] {
            let read: SelectionPod = serde_json::from_value(pod.clone()).unwrap();
            let spec = read.0.spec.unwrap_or_default();
            assert_eq!(spec.affinity, None, "{pod}");
            assert!(spec.containers.iter().all(|c| c.image.is_none()), "{pod}");
        }
    }

    #[test]
    fn a_member_it_reads_of_the_wrong_type_is_an_error() {
        let wrong = json!({"spec": {"containers": [{"name": "a", "image": 5}]}});
        let err = serde_json::from_value::<SelectionPod>(wrong).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
