//! An ArtifactCache's status from what the controller observed of its objects: where steps reach
//! the registry, and whether they can (the `Ready` condition with a reason from
//! [`CacheReason`]), with the Event a change of readiness deserves. Pure: the controller reads
//! the objects and writes the answer.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::planner::CacheState;
use crate::api::{
    ArtifactCache, ArtifactCacheStatus, CacheReason, ConditionType, REGISTRY_PORT, WantedCondition,
    merge_condition,
};

/// The condition type steps' admission reads.
const READY: &str = ConditionType::Ready.as_str();

/// What the controller saw of a deployed cache's objects (as applied, so current).
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub deployment: &'a Deployment,
    pub service: &'a Service,
    /// The registry's pods (read only while it has no ready replica).
    pub pods: &'a [Pod],
}

/// The Event a status change deserves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    pub warning: bool,
    pub reason: CacheReason,
    pub note: String,
}

/// The status of `cache`: `observed` is `None` for a cache that deploys nothing (or before its
/// objects were applied); `credentials` is the Secret generated for it. `now` stamps a condition
/// that changed.
pub fn status(
    cache: &ArtifactCache,
    observed: Option<Observed<'_>>,
    credentials: Option<String>,
    now: &Time,
) -> ArtifactCacheStatus {
    let (endpoint, plain_http, reason, message) = readiness(cache, observed);
    build(
        cache,
        endpoint,
        reason,
        message,
        plain_http,
        credentials,
        now,
    )
}

/// The status of a cache the controller wrote nothing for (`Conflict`, `ImageNotAllowed`): not
/// Ready, saying why; the endpoint it had is kept off, so no step is sent to it.
pub(super) fn refused(
    cache: &ArtifactCache,
    reason: CacheReason,
    message: String,
    credentials: Option<String>,
    now: &Time,
) -> ArtifactCacheStatus {
    build(cache, None, reason, message, true, credentials, now)
}

fn build(
    cache: &ArtifactCache,
    endpoint: Option<String>,
    reason: CacheReason,
    message: String,
    plain_http: bool,
    credentials: Option<String>,
    now: &Time,
) -> ArtifactCacheStatus {
    let ready = reason == CacheReason::Available || reason == CacheReason::External;
    let previous = cache.status.as_ref().map(|s| s.conditions.as_slice());
    let wanted = WantedCondition {
        type_: ConditionType::Ready,
        status: ready,
        reason: reason.as_str(),
        message,
    };
    let generation = cache.metadata.generation;
    ArtifactCacheStatus {
        observed_generation: generation,
        endpoint,
        plain_http,
        credentials_secret: credentials,
        storage: storage_kind(cache).map(str::to_owned),
        conditions: vec![merge_condition(
            previous.unwrap_or_default(),
            wanted,
            generation,
            now,
        )],
    }
}

/// The Event for going from `before` to `after`: one when readiness or its reason changes; a
/// Warning when a Ready cache stops being Ready, or when the controller refuses to write.
pub(super) fn change(
    before: Option<&ArtifactCacheStatus>,
    after: &ArtifactCacheStatus,
) -> Option<Change> {
    let ready = |s: &ArtifactCacheStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == READY)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    let (status, reason, message) = ready(after)?;
    let previous = before.and_then(ready);
    if previous
        .as_ref()
        .is_some_and(|(s, r, _)| *s == status && *r == reason)
    {
        return None;
    }
    let lost = previous.is_some_and(|(s, _, _)| s == "True") && status != "True";
    let reason = CacheReason::ALL
        .into_iter()
        .find(|r| r.as_str() == reason)?;
    let refused = matches!(reason, CacheReason::Conflict | CacheReason::ImageNotAllowed);
    Some(Change {
        warning: lost || refused,
        reason,
        note: message,
    })
}

/// How many of `caches` steps' admission sees as Ready, and how many not (for the metrics).
pub(super) fn count_ready<'a>(
    caches: impl IntoIterator<Item = &'a ArtifactCache>,
) -> (usize, usize) {
    caches
        .into_iter()
        .fold((0, 0), |(ready, not_ready), cache| {
            match cache_state(Some(cache)) {
                CacheState::Ready { .. } => (ready + 1, not_ready),
                _ => (ready, not_ready + 1),
            }
        })
}

/// What steps' admission knows of a cache: Ready, starting (not Ready, but its current status
/// names its endpoint and any generated credentials, so steps can be wired and held), not Ready
/// (with the condition's message; stuck when it cannot become Ready as it is), or missing.
pub(super) fn cache_state(cache: Option<&ArtifactCache>) -> CacheState {
    let Some(cache) = cache else {
        return CacheState::Missing;
    };
    let Some(status) = cache.status.as_ref() else {
        return CacheState::NotReady {
            reason: "it has no status yet (is ocifit's controller running?)".to_owned(),
            stuck: false,
        };
    };
    let condition = status.conditions.iter().find(|c| c.type_ == READY);
    let current = status.observed_generation == cache.metadata.generation;
    let generates_credentials = cache.spec.deploy && cache.spec.htpasswd_secret_ref.is_none();
    let wired = generates_credentials <= status.credentials_secret.is_some();
    match (condition, &status.endpoint) {
        (Some(c), Some(endpoint)) if c.status == "True" && current => CacheState::Ready {
            endpoint: endpoint.clone(),
            plain_http: status.plain_http,
            credentials: status.credentials_secret.clone(),
        },
        (Some(c), Some(endpoint)) if current && wired && !stuck(&c.reason) => {
            CacheState::Starting {
                endpoint: endpoint.clone(),
                plain_http: status.plain_http,
                credentials: status.credentials_secret.clone(),
                reason: format!("{}: {}", c.reason, c.message),
            }
        }
        (Some(c), _) if current => CacheState::NotReady {
            reason: format!("{}: {}", c.reason, c.message),
            stuck: stuck(&c.reason),
        },
        _ => CacheState::NotReady {
            reason: "its spec changed and the controller has not caught up yet".to_owned(),
            stuck: false,
        },
    }
}

/// Whether a Ready condition's reason says the cache cannot become Ready until someone changes
/// something (the controller wrote nothing).
fn stuck(reason: &str) -> bool {
    [CacheReason::Conflict, CacheReason::ImageNotAllowed]
        .iter()
        .any(|r| r.as_str() == reason)
}

/// Where a deployed cache keeps its content (the status' `storage`).
fn storage_kind(cache: &ArtifactCache) -> Option<&'static str> {
    if !cache.spec.deploy {
        return None;
    }
    let storage = cache.spec.storage.as_ref();
    Some(match storage {
        Some(s) if s.s3.is_some() => "s3",
        Some(s) if s.persistent_volume_claim.is_some() => "persistentVolumeClaim",
        _ => "emptyDir",
    })
}

/// Whether a registry pod runs and is not Ready: on object storage, its readiness is
/// distribution's storage health check, so its bucket does not answer.
fn runs_unready(pod: &Pod) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    statuses.into_iter().flatten().any(|c| {
        let running = c.state.as_ref().is_some_and(|s| s.running.is_some());
        running && !c.ready
    })
}

/// The `StorageUnavailable` message of a cache on `storage.s3` whose replicas run unready, or
/// `None` when none does.
fn storage_unavailable(cache: &ArtifactCache, pods: &[Pod]) -> Option<String> {
    let s3 = cache.spec.storage.as_ref()?.s3.as_ref()?;
    let pod = pods.iter().find(|pod| runs_unready(pod))?;
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    Some(format!(
        "the registry runs but its bucket {} at {} does not answer distribution's storage health check (no such bucket, credentials the store refuses, or an endpoint the registry cannot reach): its pod {name}'s log says which, on the line 'storage driver health check'",
        s3.bucket, s3.endpoint
    ))
}

/// Whether the Deployment has a ready replica of its current template: a replica counts once the
/// Deployment controller saw this generation.
pub(super) fn has_ready_replica(deployment: &Deployment) -> bool {
    let status = deployment.status.as_ref();
    let ready = status.and_then(|s| s.ready_replicas).unwrap_or(0);
    let current = status.and_then(|s| s.observed_generation) >= deployment.metadata.generation;
    ready >= 1 && current
}

/// Why a pod's container is waiting to start (`ImagePullBackOff`, `CreateContainerConfigError`,
/// `CrashLoopBackOff`, …), as `its pod NAME: container C is waiting: REASON: MESSAGE`.
fn waiting(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let containers = status.init_container_statuses.iter().flatten();
    let (container, state) = containers
        .chain(status.container_statuses.iter().flatten())
        .find_map(|c| Some((c.name.as_str(), c.state.as_ref()?.waiting.as_ref()?)))?;
    // A container that is only being created is no problem to report.
    let reason = state
        .reason
        .as_deref()
        .filter(|r| *r != "ContainerCreating")?;
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let mut text = format!("its pod {name}: container {container} is waiting: {reason}");
    if let Some(message) = state.message.as_deref().filter(|m| !m.is_empty()) {
        text.push_str(&format!(": {message}"));
    }
    Some(text)
}

fn readiness(
    cache: &ArtifactCache,
    observed: Option<Observed<'_>>,
) -> (Option<String>, bool, CacheReason, String) {
    if !cache.spec.deploy {
        let endpoint = cache.spec.endpoint.clone().unwrap_or_default();
        let message = format!("steps use the existing registry at {endpoint}");
        return (
            Some(endpoint),
            cache.spec.plain_http,
            CacheReason::External,
            message,
        );
    }
    let Some(Observed {
        deployment,
        service,
        pods,
    }) = observed
    else {
        return (
            None,
            true,
            CacheReason::Deploying,
            "the registry's objects are being created".to_owned(),
        );
    };
    let cluster_ip = service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None");
    let Some(ip) = cluster_ip else {
        return (
            None,
            true,
            CacheReason::ServicePending,
            format!(
                "the Service {} has no ClusterIP yet",
                service.metadata.name.as_deref().unwrap_or_default()
            ),
        );
    };
    // An IPv6 ClusterIP is bracketed, so `host:port` stays one reference's registry part.
    let endpoint = if ip.contains(':') {
        format!("[{ip}]:{REGISTRY_PORT}")
    } else {
        format!("{ip}:{REGISTRY_PORT}")
    };
    let deployment_name = deployment.metadata.name.as_deref().unwrap_or_default();
    let status = deployment.status.as_ref();
    if !has_ready_replica(deployment) {
        let conditions = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten();
        // A pod the ReplicaSet cannot create (Pod Security, a quota) says why only there.
        let failure = conditions
            .clone()
            .find(|c| c.type_ == "ReplicaFailure" && c.status == "True");
        let why = failure
            .or_else(|| conditions.clone().find(|c| c.status == "False"))
            .and_then(|c| c.message.clone());
        let mut message = match why {
            Some(why) => {
                format!("the registry's Deployment {deployment_name} has no ready replica: {why}")
            }
            None => format!("the registry's Deployment {deployment_name} has no ready replica yet"),
        };
        if let Some(stuck) = pods.iter().find_map(waiting) {
            message.push_str(&format!("; {stuck}"));
        } else if let Some(store) = storage_unavailable(cache, pods) {
            return (Some(endpoint), true, CacheReason::StorageUnavailable, store);
        }
        // ocifit does not read the user's Secret; the kubelet waits for it before the registry
        // can start, and says so on the registry's pod.
        if let Some(secret) = &cache.spec.htpasswd_secret_ref {
            message.push_str(&format!(
                " (it mounts key {} of the htpasswd Secret {}: if that is missing, the registry's pod says so)",
                secret.key, secret.name
            ));
        }
        return (Some(endpoint), true, CacheReason::Deploying, message);
    }
    let message = format!("the registry answers at {endpoint} (Service {deployment_name})");
    (Some(endpoint), true, CacheReason::Available, message)
}

#[cfg(test)]
mod tests;
