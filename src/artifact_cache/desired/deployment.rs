//! A cache's Deployment: its registry pods (basic auth on every request, deletes off, Pod
//! Security `restricted`) with their data (a volume, or the bucket of `storage.s3`) and htpasswd.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvFromSource, EnvVar, HTTPGetAction, KeyToPath,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile,
    SecretEnvSource, SecretVolumeSource, SecurityContext, TCPSocketAction,
    TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::object_store;
use crate::api::{ArtifactCache, REGISTRY_PORT, S3Storage};

/// Where the registry keeps its content.
const DATA_DIR: &str = "/var/lib/registry";
/// Where the htpasswd file is mounted.
const AUTH_DIR: &str = "/auth";
/// The registry's user and group: distribution's official image would run as root, which Pod
/// Security `restricted` refuses; any non-root user can serve port 5000 and write the data volume.
const REGISTRY_USER: i64 = 65532;

/// The Secret and key holding the registry's htpasswd file.
pub(super) struct Auth {
    pub secret_name: String,
    pub key: String,
}

/// What the Deployment is made of besides the cache's spec.
pub(super) struct DeploymentInputs<'a> {
    pub metadata: ObjectMeta,
    pub labels: &'a BTreeMap<String, String>,
    pub selector: &'a BTreeMap<String, String>,
    /// Where the registry keeps its content.
    pub store: Store<'a>,
    pub auth: Auth,
}

/// Where the registry keeps its content.
pub(super) enum Store<'a> {
    /// A volume (an emptyDir or the cache's claim), named `data`.
    Volume(Box<Volume>),
    /// A bucket; the generated Secret holding the HTTP secret, if any.
    S3(&'a S3Storage, Option<String>),
}

/// The Deployment of the registry `cache` deploys.
pub(super) fn deployment(cache: &ArtifactCache, parts: DeploymentInputs<'_>) -> Deployment {
    let cache_name = cache.metadata.name.as_deref().unwrap_or_default();
    let shared = matches!(parts.store, Store::S3(..));
    let auth_volume = Volume {
        name: "auth".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(parts.auth.secret_name),
            items: Some(vec![KeyToPath {
                key: parts.auth.key,
                path: "htpasswd".into(),
                mode: None,
            }]),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    };
    let (container, store_volume) = container(cache, cache_name, parts.store);
    let volumes = store_volume.into_iter().chain([auth_volume]).collect();
    Deployment {
        metadata: parts.metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(cache.spec.replicas),
            // On a volume, one registry writes the storage at a time (a claim is
            // ReadWriteOnce); on a bucket, replicas are replaced one by one while others serve.
            strategy: Some(DeploymentStrategy {
                type_: Some(if shared { "RollingUpdate" } else { "Recreate" }.into()),
                rolling_update: None,
            }),
            selector: LabelSelector {
                match_labels: Some(parts.selector.clone()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(parts.labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    volumes: Some(volumes),
                    topology_spread_constraints: shared.then(|| spread(parts.selector)),
                    automount_service_account_token: Some(false),
                    security_context: Some(pod_security_context()),
                    enable_service_links: Some(false),
                    node_selector: cache.spec.node_selector.clone(),
                    tolerations: cache.spec.tolerations.clone(),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// Replicas spread over nodes where the scheduler can (a one-node cluster still runs them all).
fn spread(selector: &BTreeMap<String, String>) -> Vec<TopologySpreadConstraint> {
    vec![TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "kubernetes.io/hostname".into(),
        when_unsatisfiable: "ScheduleAnyway".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some(selector.clone()),
            match_expressions: None,
        }),
        ..TopologySpreadConstraint::default()
    }]
}

/// The registry's container (its settings in `env`, the cache's Secrets in `envFrom`) and the
/// volume its store needs besides the htpasswd's, if any.
fn container(cache: &ArtifactCache, realm: &str, store: Store<'_>) -> (Container, Option<Volume>) {
    let mut env = vec![env_var("REGISTRY_HTTP_ADDR", &format!(":{REGISTRY_PORT}"))];
    let mut mounts = vec![VolumeMount {
        name: "auth".into(),
        mount_path: AUTH_DIR.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }];
    let (volume, readiness) = match store {
        Store::Volume(data) => {
            env.push(env_var(
                "REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY",
                DATA_DIR,
            ));
            mounts.insert(
                0,
                VolumeMount {
                    name: "data".into(),
                    mount_path: DATA_DIR.into(),
                    ..VolumeMount::default()
                },
            );
            (Some(*data), probe(2))
        }
        Store::S3(s3, http_secret) => {
            env.extend(object_store::env(s3, http_secret.as_deref()));
            let ca = object_store::ca(s3);
            let volume = ca.map(|(volume, mount)| {
                mounts.push(mount);
                volume
            });
            (volume, health_probe())
        }
    };
    env.extend([
        // Nothing a step can reach may delete what another step wrote.
        env_var("REGISTRY_STORAGE_DELETE_ENABLED", "false"),
        env_var("REGISTRY_AUTH_HTPASSWD_REALM", realm),
        env_var(
            "REGISTRY_AUTH_HTPASSWD_PATH",
            &format!("{AUTH_DIR}/htpasswd"),
        ),
    ]);
    let container = Container {
        name: "registry".into(),
        image: Some(super::image(cache)),
        ports: Some(vec![ContainerPort {
            name: Some("registry".into()),
            container_port: REGISTRY_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        env: Some(env),
        // The kubelet lets `env` win over `envFrom`: ocifit's own settings stay in force.
        env_from: cache.spec.env_secret_refs.as_ref().map(|secrets| {
            secrets
                .iter()
                .map(|secret| EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: secret.name.clone(),
                        optional: None,
                    }),
                    ..EnvFromSource::default()
                })
                .collect()
        }),
        volume_mounts: Some(mounts),
        resources: Some(
            cache
                .spec
                .resources
                .clone()
                .unwrap_or_else(default_resources),
        ),
        readiness_probe: Some(readiness),
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
    (container, volume)
}

/// A TCP probe: with htpasswd the registry answers 401, which an HTTP probe counts as down.
fn probe(period: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(REGISTRY_PORT),
            host: None,
        }),
        period_seconds: Some(period),
        ..Probe::default()
    }
}

/// distribution answers `/` without authentication, 200 while its storage health check passes
/// and 503 once it fails: a replica whose bucket does not answer leaves the Service. It answers
/// 200 until its first check, so none is Ready before that check ran.
fn health_probe() -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/".into()),
            port: IntOrString::Int(REGISTRY_PORT),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(object_store::HEALTH_INTERVAL_SECONDS + 3),
        period_seconds: Some(2),
        ..Probe::default()
    }
}

/// Pod Security `restricted`: a namespace enforcing it runs the registry.
fn pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(REGISTRY_USER),
        run_as_group: Some(REGISTRY_USER),
        // A claim's volume is writable by the registry's group.
        fs_group: Some(REGISTRY_USER),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..PodSecurityContext::default()
    }
}

/// Requests and a memory limit when the cache names none: a namespace with a ResourceQuota can
/// run the registry, and a runaway registry cannot take the node's memory.
fn default_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("50m".into())),
            ("memory".to_string(), Quantity("64Mi".into())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_string(),
            Quantity("512Mi".into()),
        )])),
        claims: None,
    }
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}
