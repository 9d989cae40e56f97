//! Typed builders for the objects the scenarios create: policies, pods and nodes. Each starts from
//! what most scenarios want (a policy on one artifact with the placeholder `placeholder:latest`, a
//! pod with one container `app` running the placeholder, a linux/amd64 node) and says only what a
//! scenario changes. The pod builder is the test kit's [`TestPod`], opted in to image selection
//! with [`OptIn`].

use std::collections::BTreeMap;

use ocifit::api::pod::ENABLED_LABEL;
use ocifit::api::{
    ArtifactSource, Candidate, ImageSelectionPolicy, ImageSelectionPolicySpec, OnNoMatch,
    OnUnpinned, SecretReference,
};
pub use ocifit_testkit::TestPod;
use ocifit_testkit::{FakeNode, PLACEHOLDER_IMAGE};

/// The placeholder image of every policy and pod unless a scenario names another.
pub const PLACEHOLDER: &str = PLACEHOLDER_IMAGE;

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

/// Opting a pod in to image selection.
pub trait OptIn {
    /// The label the webhook's objectSelector matches.
    fn opted_in(self) -> Self;
}

impl OptIn for TestPod {
    fn opted_in(self) -> TestPod {
        self.label(ENABLED_LABEL, "true")
    }
}

/// A linux/amd64 node (labels `kubernetes.io/os` and `kubernetes.io/arch`, which a scenario may
/// override with [`FakeNode::label`]).
pub fn linux_node(name: &str) -> FakeNode {
    FakeNode::new(name)
        .label("kubernetes.io/os", "linux")
        .label("kubernetes.io/arch", "amd64")
}
