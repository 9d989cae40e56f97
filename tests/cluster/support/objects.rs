//! Typed builders for the objects the scenarios create: policies, pods and nodes. Each starts from
//! what most scenarios want (a policy on one artifact with the placeholder `placeholder:latest`, a
//! pod with one container `app` running the placeholder, a linux/amd64 node) and says only what a
//! scenario changes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    Pod, PodSpec,
};
use kube::api::ObjectMeta;
use ocifit::api::pod::ENABLED_LABEL;
use ocifit::api::{
    ArtifactSource, Candidate, ImageSelectionPolicy, ImageSelectionPolicySpec, OnNoMatch,
    OnUnpinned, SecretReference,
};
use ocifit_testkit::FakeNode;

/// The placeholder image of every policy and pod unless a scenario names another.
pub const PLACEHOLDER: &str = "placeholder:latest";

/// An ImageSelectionPolicy to create.
#[derive(Clone, Debug)]
pub struct Policy {
    name: String,
    spec: ImageSelectionPolicySpec,
}

impl Policy {
    /// A policy on the artifact `reference` for pods using [`PLACEHOLDER`], with every other field
    /// at its default.
    pub fn on_artifact(name: &str, reference: &str) -> Policy {
        Policy::with_source(
            name,
            ArtifactSource {
                reference: Some(reference.to_owned()),
                candidates: None,
                refresh_interval: None,
                pull_secret_ref: None,
            },
        )
    }

    /// A policy on candidate images, each with its weight (`None`: the default weight).
    pub fn on_candidates(name: &str, candidates: &[(&str, Option<i32>)]) -> Policy {
        let candidates = candidates
            .iter()
            .map(|(image, weight)| Candidate {
                image: (*image).to_owned(),
                weight: weight.unwrap_or_default(),
            })
            .collect();
        Policy::with_source(
            name,
            ArtifactSource {
                reference: None,
                candidates: Some(candidates),
                refresh_interval: None,
                pull_secret_ref: None,
            },
        )
    }

    fn with_source(name: &str, artifact: ArtifactSource) -> Policy {
        Policy {
            name: name.to_owned(),
            spec: ImageSelectionPolicySpec {
                artifact,
                target_image: PLACEHOLDER.to_owned(),
                node_selector: BTreeMap::new(),
                on_unpinned: OnUnpinned::default(),
                on_no_match: OnNoMatch::default(),
                fallback_image: None,
                include_init_containers: false,
            },
        }
    }

    /// `spec.artifact.refreshInterval`.
    pub fn refresh_interval(mut self, interval: &str) -> Policy {
        self.spec.artifact.refresh_interval = Some(interval.to_owned());
        self
    }

    /// `spec.artifact.pullSecretRef`.
    pub fn pull_secret(mut self, name: &str, namespace: &str) -> Policy {
        self.spec.artifact.pull_secret_ref = Some(SecretReference {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        });
        self
    }

    /// `spec.targetImage`: the placeholder this policy's pods use.
    pub fn target_image(mut self, image: &str) -> Policy {
        self.spec.target_image = image.to_owned();
        self
    }

    /// `spec.onUnpinned`.
    pub fn on_unpinned(mut self, on_unpinned: OnUnpinned) -> Policy {
        self.spec.on_unpinned = on_unpinned;
        self
    }

    /// The object.
    pub fn build(&self) -> ImageSelectionPolicy {
        ImageSelectionPolicy::new(&self.name, self.spec.clone())
    }
}

/// A Pod to create: one container `app` running [`PLACEHOLDER`] unless told otherwise.
#[derive(Clone, Debug)]
pub struct TestPod {
    pod: Pod,
}

impl TestPod {
    pub fn named(name: &str) -> TestPod {
        TestPod {
            pod: Pod {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".to_owned(),
                        image: Some(PLACEHOLDER.to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
                ..Pod::default()
            },
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> TestPod {
        self.pod
            .metadata
            .labels
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Opts the pod in to image selection (the label the webhook's objectSelector matches).
    pub fn opted_in(self) -> TestPod {
        self.label(ENABLED_LABEL, "true")
    }

    /// The image of the container `app`.
    pub fn image(mut self, image: &str) -> TestPod {
        self.spec().containers[0].image = Some(image.to_owned());
        self
    }

    /// Adds a `nodeSelector` entry.
    pub fn node_selector(mut self, key: &str, value: &str) -> TestPod {
        self.spec()
            .node_selector
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Required node affinity: one term, `key In values`.
    pub fn requires_node_in(mut self, key: &str, values: &[&str]) -> TestPod {
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.to_owned(),
                operator: "In".to_owned(),
                values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
            }]),
            match_fields: None,
        };
        self.spec().affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![term],
                }),
                ..NodeAffinity::default()
            }),
            ..Affinity::default()
        });
        self
    }

    /// No ServiceAccount token mounted.
    pub fn without_token(mut self) -> TestPod {
        self.spec().automount_service_account_token = Some(false);
        self
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_default()
    }

    /// The object.
    pub fn build(&self) -> Pod {
        self.pod.clone()
    }
}

/// A linux/amd64 node (labels `kubernetes.io/os` and `kubernetes.io/arch`, which a scenario may
/// override with [`FakeNode::label`]).
pub fn linux_node(name: &str) -> FakeNode {
    FakeNode::new(name)
        .label("kubernetes.io/os", "linux")
        .label("kubernetes.io/arch", "amd64")
}
