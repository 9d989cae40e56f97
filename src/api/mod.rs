//! The `ImageSelectionPolicy` API (group `ocifit.io`, version `v1alpha1`) and the names of the pod
//! contract (labels and annotations). Types and constants only: no client, no decisions.

mod conditions;
mod policy;

pub use conditions::{ConditionType, Reason};
pub use policy::{
    ArtifactSource, ArtifactStatus, Candidate, ClassMatch, ClassStatus, ImageSelectionPolicy,
    ImageSelectionPolicySpec, ImageSelectionPolicyStatus, OnNoMatch, OnUnpinned, SecretReference,
};

/// The API group of every ocifit resource.
pub const GROUP: &str = "ocifit.io";

/// The one field manager under which ocifit writes, so server-side apply attributes every field
/// it owns to it and nothing else.
pub const FIELD_MANAGER: &str = "ocifit.io/controller";

/// The pod contract: label and annotation names, compatible with the seed project (ocifit-k8s).
pub mod pod {
    /// Label a pod carries to opt in (value `"true"`); the webhook's objectSelector selects on it.
    pub const ENABLED_LABEL: &str = "oci.image.compatibilities.selection/enabled";
    /// Label or annotation naming the ImageSelectionPolicy to use.
    pub const POLICY: &str = "oci.image.compatibilities.selection/policy";
    /// Seed annotation: the compatibility artifact reference, matched against policies' artifact refs.
    pub const IMAGE_REF_ANNOTATION: &str = "oci.image.compatibilities.selection/image-ref";
    /// Seed annotation: overrides the policy's placeholder image for this pod.
    pub const TARGET_IMAGE_ANNOTATION: &str = "oci.image.compatibilities.selection/target-image";
}
