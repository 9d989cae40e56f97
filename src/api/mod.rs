//! The `ImageSelectionPolicy`, `PlacementPolicy` and `ArtifactCache` APIs (group `ocifit.io`, version
//! `v1alpha1`) and the names of their pod contracts (labels and annotations). Types and constants,
//! and the one merge of a status condition every controller writes with: no client, no decisions.

mod artifact_cache;
mod conditions;
mod duration;
mod placement;
mod policy;
pub use placement::{
    FailureAction, Misplaced, NoCommonPlatform, PlacementPolicy, PlacementPolicySpec,
    PlacementPolicyStatus, PlacementReason, PodCounts,
};

pub use artifact_cache::ArtifactCache;

pub use artifact_cache::ArtifactCacheSpec;

pub use artifact_cache::ArtifactCacheStatus;

pub use artifact_cache::CaReference;

pub use artifact_cache::CacheReason;

pub use artifact_cache::CacheStorage;

pub use artifact_cache::ClaimStorage;

pub use artifact_cache::DEFAULT_REGISTRY_IMAGE;

pub use artifact_cache::EmptyDirStorage;

pub use artifact_cache::KeyReference;

pub use artifact_cache::LocalSecretReference;

pub use artifact_cache::REGISTRY_PORT;

pub use artifact_cache::S3CredentialsReference;

pub use artifact_cache::S3Storage;

pub use artifact_cache::SecretKeyReference;

pub use artifact_cache::step;
pub use conditions::{ConditionType, Reason, WantedCondition, merge_condition};
pub use duration::{DURATION_PATTERN, parse_duration};
pub use placement::pod as placement_pod;
pub use policy::{
    ArtifactSource, ArtifactStatus, Candidate, ClassMatch, ClassStatus, ImageSelectionPolicy,
    ImageSelectionPolicySpec, ImageSelectionPolicyStatus, OnNoMatch, OnUnpinned, SecretReference,
};

/// The API group of every ocifit resource.
pub const GROUP: &str = "ocifit.io";

/// The one field manager under which ocifit writes, so server-side apply attributes every field
/// it owns to it and nothing else.
pub const FIELD_MANAGER: &str = "ocifit.io/controller";

/// The reporting controller of the Events the controllers and the certificate manager publish.
pub const REPORTING_CONTROLLER: &str = "ocifit-controller";

/// The reporting controller of the Events admission publishes.
pub const REPORTING_ADMISSION: &str = "ocifit-webhook";

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
    /// Seed annotation: the model ocifit-k8s's model server chose the image with. Not
    /// supported: a pod carrying it is refused (`ModelUnsupported`), never held undecided.
    pub const MODEL_ANNOTATION: &str = "oci.image.compatibilities.selection/model";
    /// Annotation on pods whose mirror is run by a kubelet (static pods): never patched.
    pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

    /// Decision annotation: the ImageSelectionPolicy that chose the pod's images.
    pub const DECISION_POLICY: &str = "ocifit.io/policy";
    /// Decision annotation: a JSON map from container name to the image it was given (init
    /// containers included when replaced).
    pub const DECISION_IMAGES: &str = "ocifit.io/images";
    /// Decision annotation: the node classes the pod may run on, comma-separated, sorted.
    pub const DECISION_CLASSES: &str = "ocifit.io/classes";
    /// Decision annotation: the digest of the compatibility artifact the decision came from.
    pub const DECISION_ARTIFACT_DIGEST: &str = "ocifit.io/artifact-digest";

    /// Scheduling gate an opted-in pod is admitted with while ocifit cannot decide its image yet
    /// (its policy resolving, a node class not reconciled, the policy not in this replica's
    /// store); the controller removes it with the decision.
    pub const SCHEDULING_GATE: &str = "selection.ocifit.io/image";
    /// Label (value `"true"`) on a pod admitted with [`SCHEDULING_GATE`], so the controller
    /// watches only those pods; removed with the gate.
    pub const HELD_LABEL: &str = "selection.ocifit.io/held";
    /// Annotation on a pod kept held past the hold bound (failure rule `Fail`): why.
    pub const HELD_ANNOTATION: &str = "selection.ocifit.io/held";
    /// Label (value `"true"`) on an ImageSelectionPolicy ocifit created for an `image-ref` no
    /// policy used: resolved anonymously, from public addresses only.
    pub const MANAGED_LABEL: &str = "selection.ocifit.io/managed";
    /// Label on a pod given its image by a managed policy: that policy's name, so the leader can
    /// tell a managed policy still in use (a label selector) from one to collect.
    pub const MANAGED_POLICY_LABEL: &str = "selection.ocifit.io/managed-policy";
    /// Label on a managed ImageSelectionPolicy: the namespace of the pod it was created for,
    /// which it counts against (`--image-ref-policies-per-namespace`).
    pub const MANAGED_NAMESPACE_LABEL: &str = "selection.ocifit.io/managed-for";
}
