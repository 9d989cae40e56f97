//! The ArtifactCache custom resource (a registry a workflow's steps pull their inputs from and push
//! their outputs to) and the step contract: the oras-operator's annotation names, kept as they are so
//! workflow tools that write them work unchanged. Types and constants only.

// kube's `x_kube` validation derive copies each validated type into a private scope, where
// `unreachable_pub` sees it unexported; the types themselves are exported at `api`'s door.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::conditions::names;

/// The registry image deployed when `spec.image` is not set: distribution's official image.
pub const DEFAULT_REGISTRY_IMAGE: &str = "docker.io/library/registry:3.0.0";

/// The port the deployed registry listens on, and its Service's port.
pub const REGISTRY_PORT: i32 = 5000;

/// What the user asks: a registry to deploy (image, storage, resources, credentials), or an existing
/// one to use.
// Each printcolumn repeats `type_ = "string"`; clippy reads those as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "ocifit.io",
    version = "v1alpha1",
    kind = "ArtifactCache",
    plural = "artifactcaches",
    shortname = "ac",
    category = "ocifit",
    namespaced,
    status = "ArtifactCacheStatus",
    derive = "PartialEq",
    doc = "An OCI registry for a workflow's artifacts: steps (pods and Jobs annotated with the oras-operator's contract) in this namespace pull their inputs from it before they start and push their outputs to it when they succeed.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
        description = "Whether steps can use the cache"
    ),
    printcolumn(
        name = "Endpoint",
        type_ = "string",
        json_path = ".status.endpoint",
        description = "host:port steps reach the registry at"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self.deploy != has(self.endpoint)")
    .message("set endpoint exactly when deploy is false: it names the existing registry to use instead of deploying one"))]
#[x_kube(validation = Rule::new("self.deploy || (!has(self.image) && !has(self.storage) && !has(self.resources) && !has(self.htpasswdSecretRef) && !has(self.nodeSelector) && !has(self.tolerations) && !has(self.envSecretRefs))")
    .message("image, storage, resources, htpasswdSecretRef, nodeSelector, tolerations and envSecretRefs describe the deployed registry; they cannot be set with deploy: false"))]
#[x_kube(validation = Rule::new("self.replicas == 1 || (has(self.storage) && has(self.storage.s3))")
    .message("replicas above 1 need storage.s3: registry replicas share their content only through object storage (an emptyDir is each pod's own, a claim is ReadWriteOnce)"))]
#[serde(rename_all = "camelCase")]
pub struct ArtifactCacheSpec {
    /// Deploy a registry for this cache (the default), or use an existing one at `endpoint`.
    #[serde(default = "deploy_default")]
    pub deploy: bool,

    /// The registry image to deploy (distribution's `registry`, or any image that serves the OCI
    /// distribution API on port 5000 and takes distribution's `REGISTRY_*` environment).
    /// Default `docker.io/library/registry:3.0.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = r"^\S+$"))]
    pub image: Option<String>,

    /// Where the deployed registry keeps its content. Default: an emptyDir of at most 10Gi, which
    /// lives as long as the registry's pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<CacheStorage>,

    /// How many registry pods serve the cache, spread across nodes behind its Service (default 1).
    /// More than one only with `storage.s3`, where every replica reads and writes the same bucket.
    #[serde(default = "replicas_default")]
    #[schemars(range(min = 1, max = 16))]
    pub replicas: i32,

    /// CPU and memory for the registry container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Node labels the registry's pod must match (its `nodeSelector`), at most 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 16))]
    pub node_selector: Option<BTreeMap<String, String>>,

    /// Taints the registry's pod tolerates, at most 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub tolerations: Option<Vec<Toleration>>,

    /// A Secret in this namespace holding an htpasswd file (bcrypt entries) under `key`, used
    /// instead of the credentials ocifit generates for the cache: steps then name a Secret with
    /// `ORAS_USER`, `ORAS_PULL_PASS` and `ORAS_PUSH_PASS` in their `oras-env` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub htpasswd_secret_ref: Option<SecretKeyReference>,

    /// Secrets in this namespace whose keys become the registry container's environment (the
    /// oras-operator's `secrets.orasEnv`), e.g. distribution's `REGISTRY_HTTP_SECRET` or
    /// `REGISTRY_STORAGE_*` settings. Listed first to last, a later Secret's key wins; the
    /// settings ocifit itself gives the registry (address, storage root, auth, deletes off) win
    /// over any of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 8))]
    pub env_secret_refs: Option<Vec<LocalSecretReference>>,

    /// `host[:port]` of an existing registry to use instead of deploying one (only with
    /// `deploy: false`), e.g. `registry.example.com` or `10.0.0.12:5000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[A-Za-z0-9.\-\[\]:]+$"))]
    pub endpoint: Option<String>,

    /// Reach `endpoint` over plain HTTP instead of HTTPS. The deployed registry is always reached
    /// over plain HTTP inside the cluster.
    #[serde(default, rename = "plainHTTP")]
    pub plain_http: bool,
}

fn deploy_default() -> bool {
    true
}

fn replicas_default() -> i32 {
    1
}

/// Where a deployed registry keeps its content: exactly one of the three.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("[has(self.emptyDir), has(self.persistentVolumeClaim), has(self.s3)].filter(x, x).size() == 1")
    .message("set exactly one of storage.emptyDir, storage.persistentVolumeClaim and storage.s3"))]
#[serde(rename_all = "camelCase")]
pub struct CacheStorage {
    /// Node-local scratch space, lost when the registry's pod goes away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirStorage>,
    /// A PersistentVolumeClaim the cache owns (deleted with it): content survives the registry's
    /// pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimStorage>,
    /// An S3-compatible bucket (distribution's `s3` storage driver): content survives every
    /// registry pod, and several replicas can serve it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Storage>,
}

/// An S3-compatible bucket for the registry's content. ocifit never connects to it: the registry
/// does, with the credentials from the user's Secret.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct S3Storage {
    /// The bucket, which must exist (the registry does not create it).
    #[schemars(
        length(min = 3, max = 63),
        regex(pattern = r"^[a-z0-9][a-z0-9.\-]*[a-z0-9]$")
    )]
    pub bucket: String,
    /// A key prefix inside the bucket the registry keeps everything under (distribution's
    /// `rootdirectory`), e.g. `/caches/team-a`, so several caches can share one bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 512),
        regex(pattern = r"^/?[A-Za-z0-9._\-]+(/[A-Za-z0-9._\-]+)*$")
    )]
    pub prefix: Option<String>,
    /// The object store's URL, `https://host[:port]` or `http://host[:port]` (no path); the
    /// cache's NetworkPolicy lets the registry reach this port and nothing else new.
    #[schemars(
        length(min = 8, max = 270),
        regex(
            pattern = r"^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$"
        )
    )]
    pub endpoint: String,
    /// The bucket's region (default `us-east-1`, which most S3-compatible stores accept).
    #[serde(default = "region_default")]
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9\-]+$"))]
    pub region: String,
    /// Address the bucket in the path (`endpoint/bucket/key`) rather than as a host name
    /// (`bucket.endpoint/key`); most self-hosted stores need it.
    #[serde(default)]
    pub force_path_style: bool,
    /// The Secret in this namespace holding the access key and the secret key.
    pub credentials_secret_ref: S3CredentialsReference,
    /// A CA bundle (PEM) the registry trusts for an `https` endpoint, from a Secret's or a
    /// ConfigMap's key in this namespace; the image's own CAs when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CaReference>,
}

fn region_default() -> String {
    "us-east-1".to_string()
}

/// The keys of a Secret in the cache's namespace holding S3 credentials.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct S3CredentialsReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the access key ID. Default `accessKey`.
    #[serde(default = "access_key_default")]
    #[schemars(length(min = 1, max = 253))]
    pub access_key: String,
    /// The key holding the secret access key. Default `secretKey`.
    #[serde(default = "secret_key_default")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_key: String,
}

fn access_key_default() -> String {
    "accessKey".to_string()
}

fn secret_key_default() -> String {
    "secretKey".to_string()
}

/// Where a CA bundle is: exactly one of a Secret's key and a ConfigMap's key.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("has(self.secretKeyRef) != has(self.configMapKeyRef)")
    .message("set exactly one of ca.secretKeyRef and ca.configMapKeyRef"))]
#[serde(rename_all = "camelCase")]
pub struct CaReference {
    /// A Secret's key in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<KeyReference>,
    /// A ConfigMap's key in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<KeyReference>,
}

/// One key of a Secret or ConfigMap in the cache's namespace.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KeyReference {
    /// Name of the object.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

/// An emptyDir for the registry's content.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EmptyDirStorage {
    /// The most the registry may store; the kubelet evicts the registry's pod beyond it.
    pub size_limit: Quantity,
}

/// A PersistentVolumeClaim for the registry's content.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStorage {
    /// The size requested.
    pub size: Quantity,
    /// The StorageClass; the cluster's default class when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,
}

/// A Secret in the cache's namespace.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalSecretReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A key of a Secret in the cache's namespace.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the htpasswd file. Default `htpasswd`.
    #[serde(default = "htpasswd_key_default")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

fn htpasswd_key_default() -> String {
    "htpasswd".to_string()
}

/// What the controller observed: where steps reach the cache, and whether they can.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactCacheStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `host:port` steps reach the registry at: the Service's ClusterIP and port for a deployed
    /// registry (so no cluster DNS is needed), or `spec.endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,

    /// Whether steps reach `endpoint` over plain HTTP.
    #[serde(default, rename = "plainHTTP")]
    pub plain_http: bool,

    /// The Secret ocifit generated for a deployed cache without `htpasswdSecretRef`: the
    /// registry's htpasswd and the credentials the cache's steps get by reference (`ORAS_USER` and
    /// `ORAS_PULL_PASS` for pulls, `ORAS_PUSH_USER` and `ORAS_PUSH_PASS` for pushes; one generated
    /// before ocifit split the users has no `ORAS_PUSH_USER`, and its one user pushes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<String>,

    /// Where the deployed registry keeps its content: `emptyDir`, `persistentVolumeClaim`, or
    /// `s3` (its `Ready` condition then says whether the bucket answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,

    /// Standard conditions: `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

names! {
    /// The `reason` of an ArtifactCache's `Ready` condition.
    pub enum CacheReason {
        /// The registry answers and its Service has a ClusterIP: steps can use it.
        Available,
        /// The registry's Deployment has no ready replica yet.
        Deploying,
        /// The registry's Service has no ClusterIP yet.
        ServicePending,
        /// `deploy: false`: steps use `spec.endpoint` as it is.
        External,
        /// An object the cache would own exists and is not owned by it: nothing is written.
        Conflict,
        /// `spec.image` is not on ocifit's registry image allow-list: nothing is deployed.
        ImageNotAllowed,
        /// The registry's pods run, but none passes distribution's storage health check: the bucket
        /// does not answer (no such bucket, wrong credentials, endpoint unreachable).
        StorageUnavailable,
    }
}

/// The step contract: annotations on a pod, or on a Job (which shape its pod template), under the
/// oras-operator's prefix, so workflow tools written for it work unchanged.
pub mod step {
    /// The prefix of every annotation of the contract.
    pub const PREFIX: &str = "oras.converged-computing.github.io/";

    /// The ArtifactCache to use, in the pod's namespace (default [`DEFAULT_CACHE`]).
    pub const ORAS_CACHE: &str = "oras-cache";
    /// The cache used when `oras-cache` is absent, as in the oras-operator.
    pub const DEFAULT_CACHE: &str = "oras";
    /// An artifact to pull before the step (`repository:tag`); `input-uri_N` for several.
    pub const INPUT_URI: &str = "input-uri";
    /// Where the inputs appear in the step's container.
    pub const INPUT_PATH: &str = "input-path";
    /// The artifact to push when the step succeeds.
    pub const OUTPUT_URI: &str = "output-uri";
    /// The file or directory to push.
    pub const OUTPUT_PATH: &str = "output-path";
    /// A file the step's standard output is written to (then pushable).
    pub const OUTPUT_PIPE: &str = "output-pipe";
    /// Whether directories travel as unpacked `.tar.gz` layers (default `true`).
    pub const UNPACK: &str = "unpack";
    /// A registry (`host[:port]`, or `http://host[:port]` for plain HTTP) used for every URI of
    /// the step instead of the cache.
    pub const REGISTRY: &str = "registry";
    /// A Secret with `ORAS_USER`, `ORAS_PULL_PASS` and `ORAS_PUSH_PASS`.
    pub const ORAS_ENV: &str = "oras-env";
    /// Which container is the step (required when there are several).
    pub const CONTAINER: &str = "container";
    /// Log the parsed settings and every transfer.
    pub const DEBUG: &str = "debug";
    /// The oras-operator's script and sidecar settings: accepted and ignored, with a warning.
    pub const IGNORED: [&str; 3] = ["entrypoint", "oras-entrypoint", "oras-container"];

    /// Set on a pod (or a Job's pod template) once its steps are injected, so nothing is injected
    /// twice.
    pub const INJECTED: &str = "artifacts.ocifit.io/injected";

    /// The label ocifit sets beside [`INJECTED`] (value [`STEP_LABEL_VALUE`]): the artifact cache
    /// watches the step pods by it, to count what their helpers moved.
    pub const STEP_LABEL: &str = "artifacts.ocifit.io/step";
    /// The value of [`STEP_LABEL`].
    pub const STEP_LABEL_VALUE: &str = "injected";

    /// The scheduling gate on a step's pod while its ArtifactCache is not Ready yet: the step is
    /// injected at admission, held, and released once the cache is Ready.
    pub const CACHE_GATE: &str = "artifacts.ocifit.io/cache";
    /// The label (value `true`) on a pod (or a Job's pod template) held by [`CACHE_GATE`]: the
    /// release watches held steps by it.
    pub const HELD_LABEL: &str = "artifacts.ocifit.io/held";
    /// Why a held step stays held past its bound (hold failure rule `Fail`).
    pub const HELD_ANNOTATION: &str = "artifacts.ocifit.io/held";

    /// The namespace label (value [`NAMESPACE_OPT_IN_VALUE`]) that sends the namespace's Pods and
    /// Jobs to the step webhooks; no other namespace's objects ever reach them.
    pub const NAMESPACE_OPT_IN: &str = "artifacts.ocifit.io/steps";
    /// The value of [`NAMESPACE_OPT_IN`].
    pub const NAMESPACE_OPT_IN_VALUE: &str = "enabled";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_cache_reads_as_a_typed_cache() {
        let cache: ArtifactCache =
            serde_saphyr::from_str(include_str!("../../example/artifacts/cache.yaml")).unwrap();
        assert_eq!(cache.metadata.name.as_deref(), Some("oras"));
        assert!(cache.spec.deploy);
        let storage = cache.spec.storage.unwrap();
        assert_eq!(
            storage.empty_dir.unwrap().size_limit,
            Quantity("2Gi".into())
        );
    }

    #[test]
    fn an_empty_spec_deploys_with_the_documented_defaults() {
        let spec: ArtifactCacheSpec = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(spec.deploy);
        assert!(!spec.plain_http);
        assert_eq!(spec.image, None);
        assert_eq!(spec.endpoint, None);
    }

    #[test]
    fn the_htpasswd_key_defaults_to_htpasswd() {
        let spec: ArtifactCacheSpec = serde_json::from_value(
            serde_json::json!({"htpasswdSecretRef": {"name": "cache-users"}}),
        )
        .unwrap();
        assert_eq!(spec.htpasswd_secret_ref.unwrap().key, "htpasswd");
    }

    #[test]
    fn status_serializes_with_the_documented_field_names() {
        let status = ArtifactCacheStatus {
            observed_generation: Some(2),
            endpoint: Some("10.0.0.17:5000".into()),
            plain_http: true,
            credentials_secret: None,
            storage: None,
            conditions: Vec::new(),
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"observedGeneration": 2, "endpoint": "10.0.0.17:5000", "plainHTTP": true})
        );
    }
}
