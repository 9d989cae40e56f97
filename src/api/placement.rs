//! The PlacementPolicy custom resource (group `ocifit.io`, version `v1alpha1`, cluster-scoped):
//! which pods ocifit places on nodes where every one of their containers can run, the
//! tolerations and preferences it adds per architecture, and what it does when images cannot be
//! inspected. Types, schema rules and the pod contract's names only: no decisions.
//!
//! When two policies select one pod, the one with the highest `priority` wins; on equal priority
//! the name that sorts first. The winner is written on the pod at admission (the tracking label),
//! so a later policy change never moves a pod that is already gated.

// kube's `x_kube` validation derive copies each validated type into a private scope, where
// `unreachable_pub` sees it unexported; the types themselves are exported at `api`'s door.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::names;
use super::duration::DURATION_PATTERN;

/// What the user asks: which pods, what each architecture brings, and what to do when images
/// cannot be inspected or have no platform in common.
// Each printcolumn repeats `type_`; clippy reads those as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "ocifit.io",
    version = "v1alpha1",
    kind = "PlacementPolicy",
    plural = "placementpolicies",
    shortname = "pp",
    category = "ocifit",
    status = "PlacementPolicyStatus",
    derive = "PartialEq",
    doc = "Places selected pods only on nodes where every one of their containers can run: admission holds each pod with a scheduling gate, the controller reads its images' platforms from their registries, ANDs kubernetes.io/os and kubernetes.io/arch into the pod's node affinity, adds the tolerations and preferences set per architecture, and releases the gate.",
    validation = Rule::new("self.metadata.name.size() <= 63")
        .message("a PlacementPolicy name is at most 63 characters: pods carry it as a label value"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
        description = "Whether the policy's selectors are valid and it is in use"
    ),
    printcolumn(
        name = "Priority",
        type_ = "integer",
        json_path = ".spec.priority",
        description = "Which policy wins when several select a pod: the highest"
    ),
    printcolumn(
        name = "Gated",
        type_ = "integer",
        json_path = ".status.pods.gated",
        description = "Pods waiting for their images to be inspected"
    ),
    printcolumn(
        name = "Held",
        type_ = "integer",
        json_path = ".status.pods.held",
        description = "Pods kept gated on purpose, with a reason on the pod"
    ),
    printcolumn(
        name = "Released",
        type_ = "integer",
        json_path = ".status.pods.released",
        description = "Pods whose gate ocifit removed, since the policy was created"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct PlacementPolicySpec {
    /// Which policy wins when several select the same pod: the highest priority, then the name
    /// that sorts first. Default 0.
    #[serde(default)]
    pub priority: i32,

    /// Namespaces whose pods this policy selects (their labels). Absent or empty: every
    /// namespace. kube-system and ocifit's own namespace are never selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,

    /// Pods this policy selects (their labels), within the selected namespaces. Absent or empty:
    /// every pod. A pod labelled `placement.ocifit.io/enabled: "false"` is never selected, nor
    /// are pods owned by a DaemonSet, pods with `spec.nodeName`, and mirror pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,

    /// Settings per architecture (the `kubernetes.io/arch` value): tolerations to add and a
    /// scheduling preference, applied to a pod when its containers can all run on that
    /// architecture.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub architectures: Vec<ArchitectureSettings>,

    /// Taint nodes of the listed architectures with `placement.ocifit.io/arch=<arch>:NoSchedule`
    /// and give each placed pod the toleration for the architectures its containers can run on.
    /// Off when absent. Pods that never reach ocifit (other namespaces, DaemonSets, unselected
    /// pods) do not get the toleration, so they stay off the tainted nodes unless they tolerate
    /// the taint themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_tainting: Option<NodeTainting>,

    /// What to do when a pod's images cannot be inspected (registry down, image missing,
    /// credentials refused), once both the attempts and the timeout are used up.
    #[serde(default)]
    pub on_inspection_failure: InspectionFailure,

    /// What to do when no platform suits every container of a pod (within the pod's own node
    /// requirements): `Hold` keeps it gated with an Event naming the containers that disagree;
    /// `Release` removes the gate without a platform constraint.
    #[serde(default)]
    pub on_no_common_platform: NoCommonPlatform,

    /// How long a tag's digest is trusted, by the container's effective imagePullPolicy.
    /// Digests' platforms are cached for good (content by digest never changes).
    #[serde(default)]
    pub tag_cache: TagCache,

    /// Also read this policy's pods' images with ocifit's own registry credentials
    /// (`--placement-docker-config`), after the pods' own pull Secrets and their
    /// ServiceAccount's. Off by default: only what the pod itself could pull with is used. Turning
    /// it on lets anyone who can create a pod this policy selects learn, through its placement,
    /// which images ocifit's credentials can read (their digests and platforms).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator_credentials: bool,

    /// What the controller's audit of running pods (`--placement-audit-interval`, off by
    /// default) does with a pod this policy selects that runs on a node its images are not built
    /// for: `Report` (a Warning Event on the pod and its owner, `status.pods.misplaced`);
    /// `Evict` also evicts it through the Eviction API (PodDisruptionBudgets respected), only
    /// when a ReplicaSet, StatefulSet, Job or ReplicationController recreates it, at most one
    /// pod per owner and ten in all per audit pass; the replacement is gated and placed.
    #[serde(default)]
    pub misplaced: Misplaced,
}

/// What the audit does with a running pod on the wrong platform.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Misplaced {
    /// Report it: Events on the pod and its owner, a count in the policy's status.
    #[default]
    Report,
    /// Report it and evict it, when its owner recreates it.
    Evict,
}

/// What one architecture brings to the pods that can run on it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArchitectureSettings {
    /// The architecture as nodes label it (`kubernetes.io/arch`), e.g. `amd64`, `arm64`.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([a-z0-9_.-]*[a-z0-9])?$")
    )]
    pub name: String,

    /// Weight (1-100) of a preferred node affinity term for this architecture, added when the
    /// pod can run on it. Absent: no preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,

    /// Tolerations added to pods that can run on this architecture (e.g. for a tainted arm64
    /// pool).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub tolerations: Vec<Toleration>,

    /// Node labels (key: value) a node of this architecture must also carry for the pod to land
    /// there, ANDed into the pod's required node affinity with the architecture (e.g.
    /// `node.example.com/pool: graviton`). When the architectures a pod can run on require
    /// different labels and the pod has required node affinity of its own, the pod is narrowed
    /// to the architectures of one set of labels, with a warning Event (docs/placement.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub require_node_labels: BTreeMap<String, String>,
}

/// Node tainting by architecture.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeTainting {
    /// The architectures whose nodes are tainted; nodes of other architectures are left alone
    /// (usually the one every image is built for, e.g. amd64).
    #[schemars(length(min = 1, max = 16))]
    pub architectures: Vec<String>,
}

/// The bound on inspection failures, and what follows it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("(self.action == 'Fallback') == has(self.fallbackArchitecture)")
    .message("fallbackArchitecture is set exactly when action is Fallback"))]
#[serde(rename_all = "camelCase")]
pub struct InspectionFailure {
    /// Failed inspections before giving up (each retried with a growing delay). Default 5.
    #[serde(default = "default_attempts")]
    #[schemars(range(min = 1, max = 100))]
    pub attempts: i32,

    /// Time since the pod was created before giving up, as a duration such as `2m`. Giving up
    /// takes both: this long, and `attempts` failures. Default 2m.
    #[serde(default = "default_timeout")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub timeout: String,

    /// What to do then: `ReleaseUnconstrained` removes the gate and adds nothing (the pod is
    /// scheduled as if ocifit were not there); `Fallback` constrains it to
    /// `fallbackArchitecture`; `Hold` keeps it gated and keeps trying at the longest delay.
    /// An Event on the pod says which, naming the image and the registry's error.
    #[serde(default)]
    pub action: FailureAction,

    /// The architecture a pod is constrained to with `action: Fallback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub fallback_architecture: Option<String>,
}

impl Default for InspectionFailure {
    fn default() -> Self {
        InspectionFailure {
            attempts: default_attempts(),
            timeout: default_timeout(),
            action: FailureAction::default(),
            fallback_architecture: None,
        }
    }
}

fn default_attempts() -> i32 {
    5
}

fn default_timeout() -> String {
    "2m".to_owned()
}

/// What to do with a pod whose images cannot be inspected.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailureAction {
    /// Remove the gate and add nothing: the pod is scheduled as it would be without ocifit.
    #[default]
    ReleaseUnconstrained,
    /// Constrain the pod to `fallbackArchitecture` and remove the gate.
    Fallback,
    /// Keep the pod gated, retrying at the longest delay.
    Hold,
}

/// What to do with a pod whose containers have no platform in common.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoCommonPlatform {
    /// Keep the pod gated, with an Event naming the containers that disagree.
    #[default]
    Hold,
    /// Remove the gate without a platform constraint.
    Release,
}

/// Tag lifetimes by effective imagePullPolicy (`Always` when the tag is `latest` or absent and no
/// policy is given, else `IfNotPresent`, as Kubernetes defaults it).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TagCache {
    /// For containers with `IfNotPresent`: a node that has the image keeps running what it
    /// pulled, so a tag's digest is trusted this long, as a duration such as `24h` or `7d`.
    /// Default 24h. (Containers with `Never` are not inspected: the node runs what it has.)
    #[serde(default = "default_if_not_present")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub if_not_present: String,

    /// For containers with `Always`: the kubelet pulls the tag afresh, so it is re-resolved
    /// when older than this. Default 0s: for every pod.
    #[serde(default = "default_always")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub always: String,
}

impl Default for TagCache {
    fn default() -> Self {
        TagCache {
            if_not_present: default_if_not_present(),
            always: default_always(),
        }
    }
}

fn default_if_not_present() -> String {
    "24h".to_owned()
}

fn default_always() -> String {
    "0s".to_owned()
}

/// What the controller observed for the policy.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementPolicyStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Pods this policy selected: gated and held as they exist now, released as a running total.
    #[serde(default)]
    pub pods: PodCounts,

    /// Standard conditions: `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Pods by placement state.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodCounts {
    /// Gated, waiting for inspection.
    #[serde(default)]
    pub gated: i32,
    /// Gated on purpose (no common platform, or inspection failed with `Hold`).
    #[serde(default)]
    pub held: i32,
    /// Released by ocifit's controller since the policy was created (deleting a released pod
    /// does not lower it).
    #[serde(default)]
    pub released: i32,
    /// Containers of pods it released that failed with `exec format error` (their node's CPU
    /// cannot run their image) since the policy was created, each failed restart once.
    #[serde(default)]
    pub exec_format_errors: i32,
    /// Running pods the controller's audit found on a node their images are not built for (or
    /// whose images' platforms are unknown) since the policy was created, each pod once.
    #[serde(default)]
    pub misplaced: i32,
}

names! {
    /// The machine-readable `reason` of a PlacementPolicy condition.
    pub enum PlacementReason {
        /// Valid and in use.
        Valid,
        /// A namespace or pod selector cannot be read (unknown operator, missing values).
        InvalidSelector,
        /// A duration (timeout, tag cache lifetime) cannot be read.
        InvalidDuration,
        /// `action: Fallback` names no architecture.
        MissingFallback,
    }
}

/// The placement pod contract: the scheduling gate, labels, annotations and taint ocifit reads
/// and writes on pods and nodes. Everything carries the `placement.ocifit.io/` prefix, so
/// `kubectl get pods -l placement.ocifit.io/policy` finds every pod ocifit gated.
pub mod pod {
    /// The scheduling gate admission adds; the controller removes it once the pod is placed.
    pub const SCHEDULING_GATE: &str = "placement.ocifit.io/platforms";

    /// Label admission adds beside the gate, valued with the name of the policy that selected the
    /// pod. The controller watches pods by it; it stays after release, as a record.
    pub const POLICY_LABEL: &str = "placement.ocifit.io/policy";

    /// Label the controller's release adds (value `"true"`), and admission removes from a pod it
    /// gates (a copy of a released pod carries it). It takes the pod out of every replica's watch,
    /// so what a replica holds does not grow with the pods it released.
    pub const RELEASED_LABEL: &str = "placement.ocifit.io/released";

    /// Label a pod (or its template) carries to opt out, with the value [`OPT_OUT_VALUE`].
    pub const ENABLED_LABEL: &str = "placement.ocifit.io/enabled";
    /// The value of [`ENABLED_LABEL`] that opts a pod out.
    pub const OPT_OUT_VALUE: &str = "false";

    /// Decision annotation: what the controller did, one of [`Outcome`]'s names.
    pub const OUTCOME_ANNOTATION: &str = "placement.ocifit.io/outcome";
    /// Decision annotation: the platforms the pod was constrained to, e.g. `linux/amd64,linux/arm64`
    /// (a variant, as in `linux/arm/v7`, is the lowest one some container needs).
    pub const PLATFORMS_ANNOTATION: &str = "placement.ocifit.io/platforms";
    /// Decision annotation: a JSON map from container name to the image digest inspected.
    pub const DIGESTS_ANNOTATION: &str = "placement.ocifit.io/digests";
    /// Decision annotation: why, in a sentence (why held, why unconstrained, which error).
    pub const MESSAGE_ANNOTATION: &str = "placement.ocifit.io/message";
    /// How many inspections of the pod failed so far; kept on the pod so a restarted controller
    /// neither forgets nor repeats the bound.
    pub const ATTEMPTS_ANNOTATION: &str = "placement.ocifit.io/failed-attempts";

    /// The taint key of node-tainting mode; its value is the node's architecture.
    pub const TAINT_KEY: &str = "placement.ocifit.io/arch";

    /// Namespaces never selected, whatever a policy says (besides ocifit's own).
    pub const EXCLUDED_NAMESPACES: [&str; 1] = ["kube-system"];

    /// What the controller did with a gated pod, as written in [`OUTCOME_ANNOTATION`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Outcome {
        /// Released, constrained to the platforms every container can run on.
        Constrained,
        /// Released with no platform constraint (per the policy's failure or no-common-platform
        /// choice).
        Unconstrained,
        /// Released, constrained to the policy's fallback architecture after inspection failed.
        Fallback,
        /// Kept gated on purpose; the message says why.
        Held,
    }

    impl Outcome {
        pub const fn as_str(self) -> &'static str {
            match self {
                Self::Constrained => "Constrained",
                Self::Unconstrained => "Unconstrained",
                Self::Fallback => "Fallback",
                Self::Held => "Held",
            }
        }
    }

    impl std::fmt::Display for Outcome {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.as_str())
        }
    }
}

#[cfg(test)]
mod tests;
