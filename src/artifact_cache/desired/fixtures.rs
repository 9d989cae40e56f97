//! The caches the desired objects' tests build from, and where in those objects they look.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::json;

use super::{CacheEnvironment, Desired, DesiredError, desired};
use crate::api::ArtifactCache;

/// The name of the generated credentials' Secret.
pub(super) const GENERATED: &str = "oras-registry-credentials-x7k2p";

/// The cache `workflow/oras` with `spec`.
pub(super) fn cache(spec: serde_json::Value) -> ArtifactCache {
    serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1",
        "kind": "ArtifactCache",
        "metadata": {"name": "oras", "namespace": "workflow", "uid": "4f3c-uid"},
        "spec": spec
    }))
    .unwrap()
}

/// The objects of `cache` with ocifit in `ocifit-system` and generated credentials.
pub(super) fn made(cache: &ArtifactCache) -> Result<Option<Desired>, DesiredError> {
    let settings = CacheEnvironment {
        own_namespace: "ocifit-system",
        credentials: Some(GENERATED),
    };
    desired(cache, settings)
}

/// The registry Deployment's pod.
pub(super) fn pod(desired: &Desired) -> &PodSpec {
    let spec = desired.deployment.spec.as_ref().unwrap();
    spec.template.spec.as_ref().unwrap()
}

/// The registry's container.
pub(super) fn registry_container(desired: &Desired) -> &Container {
    &pod(desired).containers[0]
}
