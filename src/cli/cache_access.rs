//! `ocifit artifact pull|push --cache NAME`: reaching an ArtifactCache from outside the cluster.
//! A deployed cache (a ClusterIP) is reached through a loopback port forwarded to its registry pod
//! through the apiserver, as `kubectl port-forward` does; one with `deploy: false` at its endpoint.
//! The pod is found through the cache's own objects, never by labels alone (anyone who can create
//! pods could copy them and receive the credentials): the Deployment the cache's UID owns, its
//! current ReplicaSet, a Ready pod of it. Credentials: `ORAS_USER` and the direction's password
//! from the environment when set, else the cache's generated Secret (a push uses its push user,
//! `ORAS_PUSH_USER`).

use std::net::{Ipv4Addr, SocketAddr};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::ListParams;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api::{ArtifactCache, REGISTRY_PORT};
use crate::artifact_cache::PUSH_USER_KEY;
use crate::artifact_cache::object_name;
use crate::cluster::pod_selector;
use crate::registry::DockerConfig;
use crate::step_helper::{Direction, USER, docker_config, from_environment};

/// The registry's port, as the port-forward names it.
const FORWARDED_PORT: u16 = REGISTRY_PORT as u16;

/// Where the cache is, for `pull` and `push`.
#[derive(Debug, clap::Args)]
pub struct CacheArgs {
    /// Reach this ArtifactCache (through a port-forward of the apiserver when it deploys its
    /// registry); references are then `repository:tag` inside it, as the steps' annotations
    /// write them.
    #[arg(long, value_name = "NAME")]
    pub cache: Option<String>,
    /// The cache's namespace (the global `-n`); default the kubeconfig context's.
    #[arg(skip)]
    pub namespace: Option<String>,
    /// Which cluster (with --cache): the global flags, filled in by `cli::run`.
    #[arg(skip)]
    pub kube: crate::startup::KubeArgs,
}

/// Why a cache cannot be reached.
#[derive(Debug, thiserror::Error)]
pub(super) enum AccessError {
    #[error("{0:#}")]
    Client(anyhow::Error),
    #[error("failed to read ArtifactCache {namespace}/{name}")]
    Cache {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("ArtifactCache {namespace}/{name} is not Ready{why}")]
    NotReady {
        namespace: String,
        name: String,
        why: NotReady,
    },
    #[error(
        "ArtifactCache {namespace}/{name} has no Ready registry pod (Deployment {deployment}): {why}"
    )]
    NoPod {
        namespace: String,
        name: String,
        deployment: String,
        why: NoPod,
    },
    #[error("failed to find the registry pod of ArtifactCache {namespace}/{name}")]
    Pods {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to read the cache's credentials Secret {namespace}/{secret}")]
    Secret {
        namespace: String,
        secret: String,
        #[source]
        source: kube::Error,
    },
    #[error("the cache's credentials are unusable")]
    Credentials(#[source] crate::registry::ConfigError),
    #[error("failed to listen on a loopback port for the port-forward")]
    Listen(#[source] std::io::Error),
    #[error("failed to port-forward to pod {namespace}/{pod} through the apiserver")]
    Forward {
        namespace: String,
        pod: String,
        #[source]
        source: kube::Error,
    },
}

/// How to reach the cache from here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// Through a port-forward to a pod of this Deployment.
    Forward { deployment: String },
    /// At the cache's endpoint (`deploy: false`).
    Direct { endpoint: String, plain_http: bool },
}

/// Why a cache has no route yet, as the end of "ArtifactCache … is not Ready…".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NotReady {
    /// Its Ready condition is not True.
    #[error(": {reason} ({message})")]
    Condition { reason: String, message: String },
    #[error(": no Ready condition yet")]
    NoCondition,
    #[error(": no endpoint in its status")]
    NoEndpoint,
}

/// The route to `cache`, or why there is none. Pure.
pub(super) fn route(cache: &ArtifactCache) -> Result<Route, NotReady> {
    let status = cache.status.clone().unwrap_or_default();
    match status.conditions.iter().find(|c| c.type_ == "Ready") {
        Some(ready) if ready.status == "True" => {}
        Some(ready) => {
            return Err(NotReady::Condition {
                reason: ready.reason.clone(),
                message: ready.message.clone(),
            });
        }
        None => return Err(NotReady::NoCondition),
    }
    if cache.spec.deploy {
        let name = cache.metadata.name.as_deref().unwrap_or_default();
        return Ok(Route::Forward {
            deployment: object_name(name),
        });
    }
    match status.endpoint {
        Some(endpoint) => Ok(Route::Direct {
            endpoint,
            plain_http: status.plain_http,
        }),
        None => Err(NotReady::NoEndpoint),
    }
}

/// The direction's user and password in the cache's credentials Secret: for a push its push
/// user, or `ORAS_USER` in a Secret generated before pushes had a user of their own. Pure.
pub(super) fn login(secret: &Secret, direction: Direction) -> Option<(String, String)> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
    };
    let user = match direction {
        Direction::Push => text(PUSH_USER_KEY).or_else(|| text(USER)),
        Direction::Pull => text(USER),
    };
    Some((user?, text(direction.password_variable())?))
}

/// Why the cache's objects lead to no pod to forward to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoPod {
    #[error("it does not exist")]
    NoDeployment,
    #[error("it is not owned by the ArtifactCache (ocifit forwards only to the cache's own)")]
    NotOwned,
    #[error("it has no current ReplicaSet")]
    NoReplicaSet,
    #[error("no pod of its current ReplicaSet {0} is Ready")]
    NotReady(String),
}

/// The pod to forward to: a Ready pod of `deployment`'s current ReplicaSet, each link checked by
/// the controller's UID in the ownerReferences, from the cache down. Pure.
pub(super) fn registry_pod(
    cache: &ArtifactCache,
    deployment: Option<&Deployment>,
    replica_sets: &[ReplicaSet],
    pods: &[Pod],
) -> Result<String, NoPod> {
    let deployment = deployment.ok_or(NoPod::NoDeployment)?;
    let cache_uid = cache.metadata.uid.as_deref().ok_or(NoPod::NotOwned)?;
    if !controlled_by(&deployment.metadata, cache_uid) {
        return Err(NoPod::NotOwned);
    }
    let deployment_uid = deployment.metadata.uid.as_deref().ok_or(NoPod::NotOwned)?;
    let revision = |meta: &ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(REVISION))
            .and_then(|r| r.parse::<u64>().ok())
    };
    let current = revision(&deployment.metadata);
    let replica_set = replica_sets
        .iter()
        .filter(|rs| controlled_by(&rs.metadata, deployment_uid))
        .filter(|rs| current.is_none() || revision(&rs.metadata) == current)
        .max_by_key(|rs| revision(&rs.metadata))
        .ok_or(NoPod::NoReplicaSet)?;
    let replica_set_name = replica_set.metadata.name.clone().unwrap_or_default();
    let replica_set_uid = replica_set
        .metadata
        .uid
        .as_deref()
        .ok_or(NoPod::NoReplicaSet)?;
    pods.iter()
        .filter(|pod| controlled_by(&pod.metadata, replica_set_uid))
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .find(|pod| {
            pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .and_then(|pod| pod.metadata.name.clone())
        .ok_or(NoPod::NotReady(replica_set_name))
}

/// The annotation the Deployment controller writes on a Deployment and its ReplicaSets.
const REVISION: &str = "deployment.kubernetes.io/revision";

/// Whether `meta`'s controlling owner has this UID.
fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// A cache reached from here: its registry's `host:port`, and what to use with it.
pub(super) struct Reached {
    pub host: String,
    pub plain_http: bool,
    pub credentials: DockerConfig,
    /// The loopback listener, open while this lives.
    _forward: Option<Forward>,
}

/// Finds the cache and opens the way to it.
pub(super) async fn reach(
    args: &CacheArgs,
    name: &str,
    direction: Direction,
) -> Result<Reached, AccessError> {
    let client = super::client(&args.kube)
        .await
        .map_err(AccessError::Client)?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let cache = Api::<ArtifactCache>::namespaced(client.clone(), &namespace)
        .get(name)
        .await
        .map_err(|source| AccessError::Cache {
            namespace: namespace.clone(),
            name: name.to_owned(),
            source,
        })?;
    let route = route(&cache).map_err(|why| AccessError::NotReady {
        namespace: namespace.clone(),
        name: name.to_owned(),
        why,
    })?;
    let (host, plain_http, forward) = match route {
        Route::Direct {
            endpoint,
            plain_http,
        } => (endpoint, plain_http, None),
        Route::Forward { deployment } => {
            let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
            let pod = ready_pod(&client, &cache, &namespace, &deployment).await?;
            let forward = Forward::open(pods, &namespace, pod).await?;
            (forward.addr.to_string(), true, Some(forward))
        }
    };
    let secret = cache.status.and_then(|s| s.credentials_secret);
    let user_in_environment = std::env::var(USER).is_ok();
    let login = match secret {
        Some(secret) if !user_in_environment => {
            let secret_object = Api::<Secret>::namespaced(client, &namespace)
                .get(&secret)
                .await
                .map_err(|source| AccessError::Secret {
                    namespace: namespace.clone(),
                    secret,
                    source,
                })?;
            login(&secret_object, direction)
        }
        _ => None,
    };
    let credentials = match login {
        Some((user, password)) => docker_config(&[host.as_str()], Some(&user), Some(&password)),
        None => from_environment(&[host.as_str()], direction),
    }
    .map_err(AccessError::Credentials)?;
    Ok(Reached {
        host,
        plain_http,
        credentials,
        _forward: forward,
    })
}

/// Reads the cache's Deployment, its ReplicaSets and pods (the selector narrows the lists; the
/// owners decide), and picks the pod with [`registry_pod`].
async fn ready_pod(
    client: &kube::Client,
    cache: &ArtifactCache,
    namespace: &str,
    deployment: &str,
) -> Result<String, AccessError> {
    let name = cache.metadata.name.clone().unwrap_or_default();
    let pods_error = |source| AccessError::Pods {
        namespace: namespace.to_owned(),
        name: name.clone(),
        source,
    };
    let found = Api::<Deployment>::namespaced(client.clone(), namespace)
        .get_opt(deployment)
        .await
        .map_err(pods_error)?;
    let selector = found.as_ref().and_then(pod_selector);
    let (replica_sets, pods) = if let Some(selector) = selector {
        let params = ListParams::default().labels(&selector);
        let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
            .list(&params)
            .await
            .map_err(pods_error)?;
        let pods = Api::<Pod>::namespaced(client.clone(), namespace)
            .list(&params)
            .await
            .map_err(pods_error)?;
        (replica_sets.items, pods.items)
    } else {
        (Vec::new(), Vec::new())
    };
    registry_pod(cache, found.as_ref(), &replica_sets, &pods).map_err(|why| AccessError::NoPod {
        namespace: namespace.to_owned(),
        name: name.clone(),
        deployment: deployment.to_owned(),
        why,
    })
}

/// A loopback port whose every connection is forwarded to the registry port of one pod.
struct Forward {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Forward {
    async fn open(pods: Api<Pod>, namespace: &str, pod: String) -> Result<Self, AccessError> {
        let port = FORWARDED_PORT;
        let forward_error = |source| AccessError::Forward {
            namespace: namespace.to_owned(),
            pod: pod.clone(),
            source,
        };
        // One forward up front, so a refusal (RBAC, no kubelet) is an error naming the pod
        // rather than a connection the registry client sees closed.
        let first = pods
            .portforward(&pod, &[port])
            .await
            .map_err(forward_error)?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(AccessError::Listen)?;
        let addr = listener.local_addr().map_err(AccessError::Listen)?;
        let task = tokio::spawn(async move {
            let mut first = Some(first);
            while let Ok((mut socket, _)) = listener.accept().await {
                let forwarder = match first.take() {
                    Some(forwarder) => Ok(forwarder),
                    None => pods.portforward(&pod, &[port]).await,
                };
                tokio::spawn(async move {
                    let mut forwarder = match forwarder {
                        Ok(forwarder) => forwarder,
                        Err(err) => {
                            tracing::warn!(error = %err, "port-forward refused");
                            return;
                        }
                    };
                    if let Some(mut upstream) = forwarder.take_stream(port) {
                        let _ = tokio::io::copy_bidirectional(&mut socket, &mut upstream).await;
                    }
                    forwarder.abort();
                });
            }
        });
        Ok(Forward { addr, task })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use serde_json::json;

    use super::*;

    fn cache(spec: serde_json::Value, status: serde_json::Value) -> ArtifactCache {
        serde_json::from_value(json!({
            "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
            "metadata": {"name": "oras", "namespace": "workflow"},
            "spec": spec, "status": status
        }))
        .unwrap()
    }

    fn ready(status: &str, reason: &str) -> serde_json::Value {
        json!([{"type": "Ready", "status": status, "reason": reason, "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    }

    #[test]
    fn a_deployed_cache_is_reached_through_its_registrys_pods() {
        let route = route(&cache(
            json!({}),
            json!({"endpoint": "10.0.0.17:5000", "plainHTTP": true, "conditions": ready("True", "Available")}),
        ));
        assert_eq!(
            route,
            Ok(Route::Forward {
                deployment: "oras-registry".into()
            })
        );
    }

    #[test]
    fn an_external_cache_is_reached_at_its_endpoint() {
        let route = route(&cache(
            json!({"deploy": false, "endpoint": "registry.example.com", "plainHTTP": false}),
            json!({"endpoint": "registry.example.com", "conditions": ready("True", "External")}),
        ));
        assert_eq!(
            route,
            Ok(Route::Direct {
                endpoint: "registry.example.com".into(),
                plain_http: false
            })
        );
    }

    #[test]
    fn a_cache_not_ready_says_why() {
        let err = route(&cache(
            json!({}),
            json!({"conditions": ready("False", "Deploying")}),
        ));
        assert_eq!(err.unwrap_err().to_string(), ": Deploying (m)");
        let err = route(&cache(json!({}), json!({})));
        assert_eq!(err.unwrap_err().to_string(), ": no Ready condition yet");
    }

    #[test]
    fn the_login_is_the_user_and_the_directions_password() {
        let secret = Secret {
            data: Some(BTreeMap::from([
                ("ORAS_USER".into(), ByteString(b"steps".to_vec())),
                ("ORAS_PULL_PASS".into(), ByteString(b"pull".to_vec())),
                ("ORAS_PUSH_PASS".into(), ByteString(b"push".to_vec())),
            ])),
            ..Secret::default()
        };
        assert_eq!(
            login(&secret, Direction::Pull),
            Some(("steps".into(), "pull".into()))
        );
        assert_eq!(
            login(&secret, Direction::Push),
            Some(("steps".into(), "push".into()))
        );
        assert_eq!(login(&Secret::default(), Direction::Pull), None);
    }

    #[test]
    fn a_push_logs_in_as_the_push_user_when_the_secret_has_one() {
        let secret = Secret {
            data: Some(BTreeMap::from([
                ("ORAS_USER".into(), ByteString(b"steps-pull".to_vec())),
                ("ORAS_PULL_PASS".into(), ByteString(b"pull".to_vec())),
                ("ORAS_PUSH_USER".into(), ByteString(b"steps-push".to_vec())),
                ("ORAS_PUSH_PASS".into(), ByteString(b"push".to_vec())),
            ])),
            ..Secret::default()
        };
        assert_eq!(
            login(&secret, Direction::Push),
            Some(("steps-push".into(), "push".into()))
        );
        assert_eq!(
            login(&secret, Direction::Pull),
            Some(("steps-pull".into(), "pull".into()))
        );
    }

    /// An object's metadata: its name, UID, controlling owner's UID and revision.
    fn meta(
        name: &str,
        uid: &str,
        owner: Option<&str>,
        revision: Option<&str>,
    ) -> serde_json::Value {
        let mut meta = json!({"name": name, "namespace": "workflow", "uid": uid,
            "labels": {"app.kubernetes.io/instance": "oras"}});
        if let Some(owner) = owner {
            meta["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "K", "name": "o",
                "uid": owner, "controller": true}]);
        }
        if let Some(revision) = revision {
            meta["annotations"] = json!({"deployment.kubernetes.io/revision": revision});
        }
        meta
    }

    fn ready_pod(name: &str, uid: &str, owner: &str) -> Pod {
        serde_json::from_value(json!({"metadata": meta(name, uid, Some(owner), None),
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap()
    }

    fn replica_set(name: &str, uid: &str, owner: &str, revision: &str) -> ReplicaSet {
        serde_json::from_value(json!({"metadata": meta(name, uid, Some(owner), Some(revision))}))
            .unwrap()
    }

    #[test]
    fn the_pod_forwarded_to_is_found_through_the_caches_own_objects_not_its_labels() {
        let mut owned = cache(json!({}), json!({}));
        owned.metadata.uid = Some("cache-uid".into());
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": meta("oras-registry", "deploy-uid", Some("cache-uid"), Some("2"))
        }))
        .unwrap();
        let replica_sets = [
            replica_set("oras-registry-old", "rs-1", "deploy-uid", "1"),
            replica_set("oras-registry-new", "rs-2", "deploy-uid", "2"),
            // A ReplicaSet with the labels and a newer revision, owned by someone else's object.
            replica_set("impostor-rs", "rs-x", "other-uid", "3"),
        ];
        // Listed first, with the cache's labels: a tenant's pod, an old revision's, a pod of the
        // impostor's ReplicaSet.
        let mut pods = vec![
            ready_pod("tenants-own", "p-0", "tenant-rs"),
            ready_pod("old-revision", "p-1", "rs-1"),
            ready_pod("impostors", "p-x", "rs-x"),
        ];
        assert_eq!(
            registry_pod(&owned, Some(&deployment), &replica_sets, &pods),
            Err(NoPod::NotReady("oras-registry-new".into()))
        );
        pods.push(ready_pod("the-registry", "p-2", "rs-2"));
        assert_eq!(
            registry_pod(&owned, Some(&deployment), &replica_sets, &pods),
            Ok("the-registry".into())
        );

        // A Deployment of that name the cache does not own leads nowhere.
        let mut foreign = deployment.clone();
        foreign.metadata.owner_references = None;
        assert_eq!(
            registry_pod(&owned, Some(&foreign), &replica_sets, &pods),
            Err(NoPod::NotOwned)
        );
        assert_eq!(
            registry_pod(&owned, None, &replica_sets, &pods),
            Err(NoPod::NoDeployment)
        );
        let err = AccessError::NoPod {
            namespace: "workflow".into(),
            name: "oras".into(),
            deployment: "oras-registry".into(),
            why: NoPod::NotOwned,
        };
        assert!(
            err.to_string().ends_with(
                "it is not owned by the ArtifactCache (ocifit forwards only to the cache's own)"
            ),
            "{err}"
        );
    }
}
