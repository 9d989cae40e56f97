//! What the release controller keeps of a pod carrying the held label: its identity, the pod
//! contract's labels and annotations (and ocifit's), and what the planner reads of its spec, by
//! the shared floor's one trim ([`crate::cluster::held`]). Pure.

use k8s_openapi::api::core::v1::Pod;

use crate::api::pod::MIRROR_ANNOTATION;
use crate::cluster::{Kept, Keys, Spec};

/// Label and annotation prefixes the planner and the release read.
const READ_PREFIXES: &[&str] = &[
    "oci.image.compatibilities.selection/",
    "ocifit.io/",
    "selection.ocifit.io/",
    MIRROR_ANNOTATION,
];

const KEPT: Kept = Kept {
    labels: Keys::Prefixed(READ_PREFIXES),
    annotations: Keys::Prefixed(READ_PREFIXES),
    spec: Spec::Scheduling,
};

/// Keeps of `pod` only what the planner reads.
pub(crate) fn trim(pod: &mut Pod) {
    crate::cluster::trim(pod, &KEPT);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        Container, EnvVar, PodSchedulingGate, PodSpec, PodStatus, Volume,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    use super::*;

    /// A held pod as a pod author could make it: megabytes in `args`, `env`, annotations, labels
    /// and volumes next to what the release reads.
    fn fat_pod() -> Pod {
        let pile = "x".repeat(64 * 1024);
        let container = |name: &str| Container {
            name: name.into(),
            image: Some(format!("registry.example/{name}:1")),
            args: Some(vec![pile.clone()]),
            command: Some(vec![pile.clone()]),
            env: Some(vec![EnvVar {
                name: "PILE".into(),
                value: Some(pile.clone()),
                ..EnvVar::default()
            }]),
            ..Container::default()
        };
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("team".into()),
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
                labels: Some(map(&[
                    ("selection.ocifit.io/held", "true"),
                    ("oci.image.compatibilities.selection/enabled", "true"),
                    ("app", &pile),
                ])),
                annotations: Some(map(&[
                    (
                        "oci.image.compatibilities.selection/image-ref",
                        "r.example/a:1",
                    ),
                    ("ocifit.io/note", "kept"),
                    (MIRROR_ANNOTATION, "m"),
                    ("kubectl.kubernetes.io/last-applied-configuration", &pile),
                ])),
                finalizers: Some(vec!["example.com/keep".into()]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![container("main")],
                init_containers: Some(vec![container("init")]),
                node_selector: Some(map(&[("kubernetes.io/arch", "arm64")])),
                scheduling_gates: Some(vec![PodSchedulingGate {
                    name: "selection.ocifit.io/image".into(),
                }]),
                volumes: Some(vec![Volume {
                    name: pile.clone(),
                    ..Volume::default()
                }]),
                service_account_name: Some("sa".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                message: Some(pile),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn a_held_pod_keeps_what_the_release_reads_and_drops_what_an_author_piles_on() {
        let mut pod = fat_pod();
        trim(&mut pod);
        let kept = serde_json::to_value(&pod).unwrap();
        let expected = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "namespace": "team",
                "uid": "u1",
                "resourceVersion": "7",
                "labels": {
                    "selection.ocifit.io/held": "true",
                    "oci.image.compatibilities.selection/enabled": "true",
                },
                "annotations": {
                    "oci.image.compatibilities.selection/image-ref": "r.example/a:1",
                    "ocifit.io/note": "kept",
                    MIRROR_ANNOTATION: "m",
                },
            },
            "spec": {
                "containers": [{"name": "main", "image": "registry.example/main:1"}],
                "initContainers": [{"name": "init", "image": "registry.example/init:1"}],
                "nodeSelector": {"kubernetes.io/arch": "arm64"},
                "schedulingGates": [{"name": "selection.ocifit.io/image"}],
            },
        });
        assert_eq!(kept, expected);
        assert!(
            kept.to_string().len() < 1024,
            "{} bytes kept of a pod of some 450 KiB",
            kept.to_string().len()
        );
    }
}
