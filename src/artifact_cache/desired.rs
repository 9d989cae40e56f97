//! The objects an ArtifactCache owns when it deploys its registry: a one-replica Deployment of the
//! registry image (basic auth on every request, deletes off, Pod Security `restricted`), a
//! ClusterIP Service steps reach it through (by its ClusterIP, so no cluster DNS is needed), a
//! NetworkPolicy admitting only the cache's namespace and ocifit's, and a PersistentVolumeClaim
//! when its storage asks for one. Each carries the cache as its controlling owner, so deleting the
//! cache deletes them; [`owned_by`] tells whether an existing object is one of them. Pure: the
//! controller applies them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Service, ServicePort, ServiceSpec, Volume,
    VolumeResourceRequirements,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest as _, Sha256};

use crate::api::{
    ArtifactCache, CacheStorage, ClaimStorage, DEFAULT_REGISTRY_IMAGE, EmptyDirStorage,
    REGISTRY_PORT,
};

use deployment::{Auth, DeploymentInputs, Store};

pub use object_store::HTTP_SECRET_KEY;

/// The emptyDir size when a cache names no storage.
pub(super) const DEFAULT_SIZE_LIMIT: &str = "10Gi";
/// The key of the generated credentials Secret holding the registry's htpasswd file.
pub(super) const HTPASSWD_KEY: &str = "htpasswd";

/// The owned objects of a deployed cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub deployment: Deployment,
    pub service: Service,
    pub network_policy: NetworkPolicy,
    pub claim: Option<PersistentVolumeClaim>,
    /// For a cache on `storage.s3`, whose replicas can serve for each other.
    pub disruption_budget: Option<PodDisruptionBudget>,
}

/// What the objects depend on besides the cache.
#[derive(Debug, Clone, Copy)]
pub struct CacheEnvironment<'a> {
    /// ocifit's own namespace: the NetworkPolicy admits it besides the cache's.
    pub own_namespace: &'a str,
    /// The Secret ocifit generated for the cache (its status' `credentialsSecret`); unused when
    /// the cache names its own `htpasswdSecretRef`.
    pub credentials: Option<&'a str>,
}

/// Why a cache's objects cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DesiredError {
    #[error("the ArtifactCache has no {0} yet (it is not stored)")]
    NotStored(&'static str),
    /// A registry is never deployed without authentication.
    #[error("the ArtifactCache has neither htpasswdSecretRef nor generated credentials yet")]
    NoCredentials,
}

/// The registry image `cache` deploys.
pub(super) fn image(cache: &ArtifactCache) -> String {
    cache
        .spec
        .image
        .clone()
        .unwrap_or_else(|| DEFAULT_REGISTRY_IMAGE.to_string())
}

/// Whether `image` may be deployed: it is one of `allowed` exactly (`--artifact-cache-images`).
pub(super) fn image_allowed(image: &str, allowed: &[String]) -> bool {
    allowed.iter().any(|a| a == image)
}

/// The metadata every owned object starts from: the name of the cache's Deployment and Service,
/// its namespace, labels and the cache as controlling owner.
pub(super) fn owned_meta(cache: &ArtifactCache) -> Result<ObjectMeta, DesiredError> {
    let cache_name = cache
        .metadata
        .name
        .as_deref()
        .ok_or(DesiredError::NotStored("name"))?;
    let uid = cache
        .metadata
        .uid
        .clone()
        .ok_or(DesiredError::NotStored("uid"))?;
    let name = object_name(cache_name);
    Ok(ObjectMeta {
        labels: Some(labels(&name)),
        name: Some(name),
        namespace: cache.metadata.namespace.clone(),
        owner_references: Some(vec![OwnerReference {
            api_version: "ocifit.io/v1alpha1".into(),
            kind: "ArtifactCache".into(),
            name: cache_name.to_string(),
            uid,
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    })
}

/// Whether an existing object's metadata names `cache` (by uid) as its controlling owner: only
/// then does the controller write it.
pub(super) fn owned_by(object: &ObjectMeta, cache: &ArtifactCache) -> bool {
    let Some(uid) = cache.metadata.uid.as_deref() else {
        return false;
    };
    object
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.uid == uid && owner.controller == Some(true))
}

/// The objects of `cache`, or `None` when it deploys nothing (`deploy: false`).
pub fn desired(
    cache: &ArtifactCache,
    settings: CacheEnvironment<'_>,
) -> Result<Option<Desired>, DesiredError> {
    if !cache.spec.deploy {
        return Ok(None);
    }
    let owned = owned_meta(cache)?;
    let name = owned.name.clone().unwrap_or_default();
    let namespace = owned.namespace.clone();
    let auth = match (&cache.spec.htpasswd_secret_ref, settings.credentials) {
        (Some(secret), _) => Auth {
            secret_name: secret.name.clone(),
            key: secret.key.clone(),
        },
        (None, Some(generated)) => Auth {
            secret_name: generated.to_string(),
            key: HTPASSWD_KEY.to_string(),
        },
        (None, None) => return Err(DesiredError::NoCredentials),
    };
    let metadata = |object_name: String| ObjectMeta {
        name: Some(object_name),
        ..owned.clone()
    };
    let labels = labels(&name);
    let selector = selector(&name);
    let storage = cache.spec.storage.clone().unwrap_or(CacheStorage {
        empty_dir: Some(EmptyDirStorage {
            size_limit: Quantity(DEFAULT_SIZE_LIMIT.into()),
        }),
        persistent_volume_claim: None,
        s3: None,
    });
    let claim_name = format!("{name}-data");
    let claim = storage
        .persistent_volume_claim
        .as_ref()
        .map(|claim| persistent_volume_claim(metadata(claim_name.clone()), claim));
    let generated = cache
        .spec
        .htpasswd_secret_ref
        .is_none()
        .then(|| settings.credentials.map(str::to_string))
        .flatten();
    let store = match &storage.s3 {
        Some(s3) => Store::S3(s3, generated),
        None => Store::Volume(Box::new(data_volume(&storage, claim_name))),
    };
    let deployment = deployment::deployment(
        cache,
        DeploymentInputs {
            metadata: metadata(name.clone()),
            labels: &labels,
            selector: &selector,
            store,
            auth,
        },
    );
    let egress = storage.s3.as_ref().map(object_store::egress);
    let network_policy = network_policy(
        metadata(name.clone()),
        &selector,
        Peers {
            namespace: namespace.as_deref().unwrap_or_default(),
            own_namespace: settings.own_namespace,
            egress,
        },
    );
    let disruption_budget = storage
        .s3
        .as_ref()
        .map(|_| object_store::disruption_budget(metadata(name.clone()), &selector));
    Ok(Some(Desired {
        deployment,
        service: service(metadata(name), selector),
        network_policy,
        claim,
        disruption_budget,
    }))
}

/// The claim a cache's `storage.persistentVolumeClaim` asks for.
fn persistent_volume_claim(metadata: ObjectMeta, claim: &ClaimStorage) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: claim.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), claim.size.clone())])),
                limits: None,
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// The registry's `data` volume: the emptyDir the storage names, else its claim (`s3` has none).
fn data_volume(storage: &CacheStorage, claim_name: String) -> Volume {
    match &storage.empty_dir {
        Some(empty_dir) => Volume {
            name: "data".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(empty_dir.size_limit.clone()),
                medium: None,
            }),
            ..Volume::default()
        },
        None => Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name,
                read_only: None,
            }),
            ..Volume::default()
        },
    }
}

/// The ClusterIP Service steps reach the registry through.
fn service(metadata: ObjectMeta, selector: BTreeMap<String, String>) -> Service {
    Service {
        metadata,
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some("registry".into()),
                port: REGISTRY_PORT,
                target_port: Some(IntOrString::String("registry".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The labels of every owned object (and of the registry's pods).
fn labels(name: &str) -> BTreeMap<String, String> {
    let mut labels = selector(name);
    labels.insert(
        "app.kubernetes.io/component".to_string(),
        "registry".to_string(),
    );
    labels.insert(
        "app.kubernetes.io/managed-by".to_string(),
        "ocifit".to_string(),
    );
    labels
}

/// The labels the Service and the NetworkPolicy select the registry's pods by.
fn selector(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "artifact-cache".to_string(),
        ),
        ("app.kubernetes.io/instance".to_string(), name.to_string()),
    ])
}

/// The name of a cache's Deployment and Service: `<cache>-registry` when that is a valid Service
/// name (a DNS-1035 label of at most 63 characters), else `artifact-cache-<hash of the name>`.
pub fn object_name(cache: &str) -> String {
    let candidate = format!("{cache}-registry");
    let valid = candidate.len() <= 63
        && candidate.starts_with(|c: char| c.is_ascii_lowercase())
        && candidate
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        return candidate;
    }
    let hash: String = Sha256::digest(cache.as_bytes())
        .iter()
        .take(5)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("artifact-cache-{hash}")
}

/// The label every namespace carries with its own name; the NetworkPolicy selects by it.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Who the registry talks with.
struct Peers<'a> {
    /// The cache's namespace.
    namespace: &'a str,
    /// ocifit's namespace.
    own_namespace: &'a str,
    /// The only egress allowed, when it is restricted (a cache on object storage).
    egress: Option<Vec<NetworkPolicyEgressRule>>,
}

/// The registry's port open to pods of the cache's namespace and of ocifit's, to nothing else:
/// defence in depth where the network enforces NetworkPolicy (the credentials hold either way).
/// A registry on object storage reaches only its store.
fn network_policy(
    metadata: ObjectMeta,
    selector: &BTreeMap<String, String>,
    peers: Peers<'_>,
) -> NetworkPolicy {
    let Peers {
        namespace,
        own_namespace,
        egress,
    } = peers;
    let mut namespaces = vec![namespace.to_string()];
    if own_namespace != namespace {
        namespaces.push(own_namespace.to_string());
    }
    let from = namespaces
        .into_iter()
        .map(|name| NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), name)])),
                match_expressions: None,
            }),
            ..NetworkPolicyPeer::default()
        })
        .collect();
    NetworkPolicy {
        metadata,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector.clone()),
                match_expressions: None,
            }),
            policy_types: Some(if egress.is_some() {
                vec!["Ingress".into(), "Egress".into()]
            } else {
                vec!["Ingress".into()]
            }),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(from),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(REGISTRY_PORT)),
                    protocol: Some("TCP".into()),
                    end_port: None,
                }]),
            }]),
            egress,
        }),
    }
}

mod deployment;
#[cfg(test)]
mod fixtures;
mod object_store;
#[cfg(test)]
mod tests;
