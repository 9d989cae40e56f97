//! The ImageSelectionPolicy custom resource: its spec (what the user asks), its status (what the
//! controller resolved), and the schema rules the apiserver enforces on it.

// kube's `x_kube` validation derive copies each validated type into a private scope, where
// `unreachable_pub` sees it unexported; the types themselves are exported at `api`'s door.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::duration::DURATION_PATTERN;
use crate::engine::{Format, Reads};

/// What the user asks: the artifact to choose from, the placeholder to replace, which nodes count
/// and what to do with pods that cannot be given a single image.
// Each printcolumn repeats `type_ = "string"`; clippy reads those as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "ocifit.io",
    version = "v1alpha1",
    kind = "ImageSelectionPolicy",
    plural = "imageselectionpolicies",
    shortname = "isp",
    category = "ocifit",
    status = "ImageSelectionPolicyStatus",
    derive = "PartialEq",
    doc = "Chooses, for each kind of node, the container image built for it from the candidates an OCI compatibility artifact lists; opted-in pods get that image in place of a placeholder.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
        description = "Whether every selected node class resolved"
    ),
    printcolumn(
        name = "Classes",
        type_ = "integer",
        json_path = ".status.classCount",
        description = "Number of node classes"
    ),
    printcolumn(
        name = "Artifact",
        type_ = "string",
        json_path = ".status.artifact.digest",
        description = "Digest of the compatibility artifact in use"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new(
    "!has(self.fallbackImage) || self.fallbackImage != self.targetImage"
).message("fallbackImage must differ from targetImage: the placeholder cannot be its own fallback"))]
#[serde(rename_all = "camelCase")]
pub struct ImageSelectionPolicySpec {
    /// Where the compatibility information comes from: one artifact listing candidate images
    /// (`ref`), or candidate images that each carry their own NFD artifact (`candidates`).
    pub artifact: ArtifactSource,

    /// The placeholder image. Containers of opted-in pods whose image equals it are given the image
    /// resolved for their node class.
    #[schemars(length(min = 1, max = 512), regex(pattern = r"^\S+$"))]
    pub target_image: String,

    /// Which nodes count for this policy (labels that must all match). Empty: every node except
    /// control-plane nodes; name `node-role.kubernetes.io/control-plane` here to include those.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// What to do with a pod whose candidate nodes resolve to different images: `Pin` adds required
    /// node affinity to the classes of the best image; `Deny` refuses the pod, naming the classes.
    #[serde(default)]
    pub on_unpinned: OnUnpinned,

    /// What to do with a pod whose candidate nodes have no compatible image (and no fallbackImage is
    /// set): `Deny` refuses it; `Allow` admits it unchanged, with the placeholder image.
    #[serde(default)]
    pub on_no_match: OnNoMatch,

    /// Image used where no candidate is compatible, instead of applying onNoMatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = r"^\S+$"))]
    pub fallback_image: Option<String>,

    /// Also replace the placeholder in init containers (regular containers always are).
    #[serde(default)]
    pub include_init_containers: bool,
}

/// The source of compatibility information; exactly one of `ref` and `candidates`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("has(self.ref) != has(self.candidates)")
    .message("exactly one of artifact.ref and artifact.candidates must be set"))]
#[serde(rename_all = "camelCase")]
pub struct ArtifactSource {
    /// OCI reference of one compatibility artifact (ocifit JSON or NFD image-compatibility) listing
    /// the candidate images, by tag or digest, e.g. `registry.example.com/acme/app-compat:v1`.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = r"^\S+$"))]
    pub reference: Option<String>,

    /// Candidate images, each carrying its own NFD image-compatibility artifact attached through
    /// the OCI referrers API. The highest-weight candidate that fits a node class wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new("self.all(c, self.exists_one(d, d.image == c.image))")
        .message("candidate images must be unique"))]
    pub candidates: Option<Vec<Candidate>>,

    /// How often tags are re-resolved to digests, as a duration such as `10m`, `1h` or `1d12h`
    /// (at least 10s). Default 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    // CEL's duration() reads Go's spelling, which has no days: a day count (always first) is
    // added up apart.
    #[x_kube(validation = Rule::new(
        "self.contains('d') \
         ? double(self.split('d')[0]) * 86400.0 + (self.endsWith('d') ? 0.0 \
           : double(duration(self.split('d')[1]).getMilliseconds()) / 1000.0) >= 10.0 \
         : duration(self) >= duration('10s')")
        .message("refreshInterval must be at least 10s"))]
    pub refresh_interval: Option<String>,

    /// A Secret of type `kubernetes.io/dockerconfigjson` with credentials for the artifact's and
    /// candidates' registries. Anonymous access when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<SecretReference>,
}

impl ArtifactSource {
    /// The digest of what compatibility information is read from (`ref` or `candidates`,
    /// not the pull Secret or the refresh interval), as `status.artifact.source` records it.
    pub fn source_digest(&self) -> String {
        let written = serde_json::to_vec(&(&self.reference, &self.candidates)).unwrap_or_default();
        let digest = Sha256::digest(&written);
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("sha256:{hex}")
    }
}

/// One candidate image of `artifact.candidates`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// The image reference, by tag or digest; its NFD artifact is found through its referrers.
    #[schemars(length(min = 1, max = 512), regex(pattern = r"^\S+$"))]
    pub image: String,

    /// Preference among fitting candidates: the highest weight wins, then the first listed.
    #[serde(default)]
    pub weight: i32,
}

/// A reference to a Secret in a named namespace.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the Secret.
    #[schemars(length(min = 1))]
    pub namespace: String,
}

/// What to do with a pod whose candidate nodes resolve to different images.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnUnpinned {
    /// Add required node affinity to the node classes of the best image.
    #[default]
    Pin,
    /// Refuse the pod with a message naming the classes.
    Deny,
}

/// What to do with a pod whose candidate nodes have no compatible image.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnNoMatch {
    /// Refuse the pod with a message saying why no candidate fits.
    #[default]
    Deny,
    /// Admit the pod unchanged.
    Allow,
}

/// What the controller resolved for the policy.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageSelectionPolicyStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The compatibility artifact in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactStatus>,

    /// The node labels and NFD features the artifact's rules read. Node classes are drawn on their
    /// values and on `kubernetes.io/arch` and `kubernetes.io/os`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_keys: Option<Reads>,

    /// Number of node classes (rows in `classes`).
    #[serde(default)]
    pub class_count: i32,

    /// One row per node class: the nodes that share the values the artifact's rules read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub classes: Vec<ClassStatus>,

    /// Standard conditions: `Ready`, `ArtifactResolved`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The compatibility artifact a status was computed from.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactStatus {
    /// Content digest of the artifact manifest, e.g. `sha256:…`.
    pub digest: String,
    /// The artifact's format: `ocifit` (JSON) or `nfd` (NFD image-compatibility v1alpha1).
    pub format: Format,
    /// Number of candidate sets the artifact lists.
    pub candidates: i32,
    /// When this digest was first fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<Time>,
    /// Which `spec.artifact` (`ref` or `candidates`) this status was resolved from, as a digest:
    /// a status from another source is never served, not even as last known good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One node class and the image resolved for it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClassStatus {
    /// Stable name: a hash of the distinguishing values.
    pub name: String,
    /// The distinguishing values (label keys and NFD features the rules read, plus os and arch).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Number of nodes in the class.
    pub nodes: i32,
    /// The image for this class; absent when no candidate is compatible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The candidate set that won.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matched: Option<ClassMatch>,
    /// Why this class got its image, or why none fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The candidate set chosen for a class.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClassMatch {
    /// Position of the set in the artifact, from 0.
    pub index: i32,
    /// The set's `tag` (the image reference, for ocifit artifacts).
    pub tag: String,
    /// The set's weight.
    pub weight: i32,
    /// The set's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_policy_reads_as_a_typed_policy() {
        let policy: ImageSelectionPolicy =
            serde_saphyr::from_str(include_str!("../../example/policy.yaml")).unwrap();
        assert_eq!(policy.metadata.name.as_deref(), Some("flavors"));
        assert_eq!(policy.spec.target_image, "placeholder:latest");
        assert_eq!(
            policy.spec.artifact.reference.as_deref(),
            Some("127.0.0.1:5000/ocifit/flavor-compat:v1")
        );
    }

    #[test]
    fn omitted_choices_default_to_pin_and_deny() {
        let spec: ImageSelectionPolicySpec = serde_json::from_value(serde_json::json!({
            "artifact": {"ref": "registry.example.com/acme/app-compat:v1"},
            "targetImage": "placeholder:latest"
        }))
        .unwrap();
        assert_eq!(spec.on_unpinned, OnUnpinned::Pin);
        assert_eq!(spec.on_no_match, OnNoMatch::Deny);
        assert!(!spec.include_init_containers);
        assert!(spec.node_selector.is_empty());
    }

    #[test]
    fn status_rows_serialize_with_the_documented_field_names() {
        let row = ClassStatus {
            name: "c-3f9a1c".into(),
            labels: BTreeMap::from([("kubernetes.io/arch".into(), "amd64".into())]),
            nodes: 2,
            image: Some("debian:11".into()),
            matched: Some(ClassMatch {
                index: 0,
                tag: "debian:11".into(),
                weight: 0,
                description: None,
            }),
            reason: None,
        };
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["match"]["tag"], "debian:11");
        assert_eq!(json["image"], "debian:11");
        assert!(json.get("reason").is_none());
    }
}
