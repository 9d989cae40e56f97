//! The objects an ArtifactCache owns when it deploys its registry: a one-replica Deployment of the
//! registry image, a ClusterIP Service steps reach it through (by its ClusterIP, so no cluster DNS
//! is needed), and a PersistentVolumeClaim when its storage asks for one. Each carries the cache as
//! its controlling owner, so deleting the cache deletes them. Pure: the controller applies them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, KeyToPath,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, PodSpec,
    PodTemplateSpec, Probe, SecretVolumeSource, SecurityContext, Service, ServicePort, ServiceSpec,
    TCPSocketAction, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest as _, Sha256};

use crate::api::{
    ArtifactCache, CacheStorage, DEFAULT_REGISTRY_IMAGE, EmptyDirStorage, REGISTRY_PORT,
};

/// The emptyDir size when a cache names no storage.
pub const DEFAULT_SIZE_LIMIT: &str = "10Gi";
/// Where the registry keeps its content.
const DATA_DIR: &str = "/var/lib/registry";
/// Where the htpasswd file is mounted.
const AUTH_DIR: &str = "/auth";

/// The owned objects of a deployed cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub deployment: Deployment,
    pub service: Service,
    pub claim: Option<PersistentVolumeClaim>,
}

/// Why a cache's objects cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DesiredError {
    #[error("the ArtifactCache has no {0} yet (it is not stored)")]
    NotStored(&'static str),
}

/// The objects of `cache`, or `None` when it deploys nothing (`deploy: false`).
pub fn desired(cache: &ArtifactCache) -> Result<Option<Desired>, DesiredError> {
    if !cache.spec.deploy {
        return Ok(None);
    }
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
    let namespace = cache.metadata.namespace.clone();
    let name = object_name(cache_name);
    let labels = BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "artifact-cache".to_string(),
        ),
        ("app.kubernetes.io/instance".to_string(), name.clone()),
        (
            "app.kubernetes.io/component".to_string(),
            "registry".to_string(),
        ),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "ocifit".to_string(),
        ),
    ]);
    let selector = BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "artifact-cache".to_string(),
        ),
        ("app.kubernetes.io/instance".to_string(), name.clone()),
    ]);
    let metadata = |object_name: String| ObjectMeta {
        name: Some(object_name),
        namespace: namespace.clone(),
        labels: Some(labels.clone()),
        owner_references: Some(vec![OwnerReference {
            api_version: "ocifit.io/v1alpha1".into(),
            kind: "ArtifactCache".into(),
            name: cache_name.to_string(),
            uid: uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    };
    let storage = cache.spec.storage.clone().unwrap_or(CacheStorage {
        empty_dir: Some(EmptyDirStorage {
            size_limit: Quantity(DEFAULT_SIZE_LIMIT.into()),
        }),
        persistent_volume_claim: None,
    });
    let claim_name = format!("{name}-data");
    let claim = storage
        .persistent_volume_claim
        .as_ref()
        .map(|claim| PersistentVolumeClaim {
            metadata: metadata(claim_name.clone()),
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
        });
    let data = match &storage.empty_dir {
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
    };
    let mut volumes = vec![data];
    let mut mounts = vec![VolumeMount {
        name: "data".into(),
        mount_path: DATA_DIR.into(),
        ..VolumeMount::default()
    }];
    let mut env = vec![
        env_var("REGISTRY_HTTP_ADDR", &format!(":{REGISTRY_PORT}")),
        env_var("REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY", DATA_DIR),
        env_var("REGISTRY_STORAGE_DELETE_ENABLED", "true"),
    ];
    if let Some(secret) = &cache.spec.htpasswd_secret_ref {
        volumes.push(Volume {
            name: "auth".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.name.clone()),
                items: Some(vec![KeyToPath {
                    key: secret.key.clone(),
                    path: "htpasswd".into(),
                    mode: None,
                }]),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        mounts.push(VolumeMount {
            name: "auth".into(),
            mount_path: AUTH_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
        env.push(env_var("REGISTRY_AUTH_HTPASSWD_REALM", cache_name));
        env.push(env_var(
            "REGISTRY_AUTH_HTPASSWD_PATH",
            &format!("{AUTH_DIR}/htpasswd"),
        ));
    }
    // A TCP probe: with htpasswd the registry answers 401, which an HTTP probe counts as down.
    let probe = |period: i32| Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(REGISTRY_PORT),
            host: None,
        }),
        period_seconds: Some(period),
        ..Probe::default()
    };
    let container = Container {
        name: "registry".into(),
        image: Some(
            cache
                .spec
                .image
                .clone()
                .unwrap_or_else(|| DEFAULT_REGISTRY_IMAGE.to_string()),
        ),
        ports: Some(vec![ContainerPort {
            name: Some("registry".into()),
            container_port: REGISTRY_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        env: Some(env),
        volume_mounts: Some(mounts),
        resources: cache.spec.resources.clone(),
        readiness_probe: Some(probe(2)),
        liveness_probe: Some(probe(10)),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let deployment = Deployment {
        metadata: metadata(name.clone()),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            // One registry writes the storage at a time (a claim is ReadWriteOnce).
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            }),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    volumes: Some(volumes),
                    automount_service_account_token: Some(false),
                    enable_service_links: Some(false),
                    node_selector: cache.spec.node_selector.clone(),
                    tolerations: cache.spec.tolerations.clone(),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    };
    let service = Service {
        metadata: metadata(name),
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
    };
    Ok(Some(Desired {
        deployment,
        service,
        claim,
    }))
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

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

#[cfg(test)]
mod tests;
