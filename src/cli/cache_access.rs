//! `ocifit artifact pull|push --cache NAME`: reaching an ArtifactCache from outside the cluster,
//! as a workflow's users fetch its results from a laptop. A deployed cache's endpoint is a
//! ClusterIP, so ocifit forwards a loopback port to the registry's pod through the apiserver (the
//! same port-forward `kubectl port-forward` uses); a cache with `deploy: false` is reached at its
//! endpoint directly. Credentials: `ORAS_USER` and the direction's password from the environment
//! when set, else the cache's generated Secret (read with `get`).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::ListParams;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api::{ArtifactCache, REGISTRY_PORT};
use crate::artifact_cache::object_name;
use crate::registry::DockerConfig;
use crate::step_helper::credentials::{self, Direction};

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
    /// The cache's namespace; default the kubeconfig context's.
    #[arg(long, short = 'n', requires = "cache")]
    pub namespace: Option<String>,
    /// The kubeconfig (with --cache); else $KUBECONFIG, ~/.kube/config or the in-cluster service
    /// account.
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// Why a cache cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
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
    #[error("ArtifactCache {namespace}/{name} has no Ready registry pod (Deployment {deployment})")]
    NoPod {
        namespace: String,
        name: String,
        deployment: String,
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
pub enum Route {
    /// Through a port-forward to a pod of this Deployment.
    Forward { deployment: String },
    /// At the cache's endpoint (`deploy: false`).
    Direct { endpoint: String, plain_http: bool },
}

/// Why a cache has no route yet, as the end of "ArtifactCache … is not Ready…".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// Its Ready condition is not True.
    #[error(": {reason} ({message})")]
    Condition { reason: String, message: String },
    #[error(": no Ready condition yet")]
    NoCondition,
    #[error(": no endpoint in its status")]
    NoEndpoint,
}

/// The route to `cache`, or why there is none. Pure.
pub fn route(cache: &ArtifactCache) -> Result<Route, NotReady> {
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

/// The user and the direction's password in the cache's credentials Secret. Pure.
pub fn login(secret: &Secret, direction: Direction) -> Option<(String, String)> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
    };
    Some((
        text(credentials::USER)?,
        text(direction.password_variable())?,
    ))
}

/// A cache reached from here: its registry's `host:port`, and what to use with it.
pub struct Reached {
    pub host: String,
    pub plain_http: bool,
    pub credentials: DockerConfig,
    /// The loopback listener, open while this lives.
    _forward: Option<Forward>,
}

/// Finds the cache and opens the way to it.
pub async fn reach(
    args: &CacheArgs,
    name: &str,
    direction: Direction,
) -> Result<Reached, AccessError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = crate::startup::kube_client(args.kubeconfig.as_deref())
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
            let pod = ready_pod(&client, &pods, &namespace, name, &deployment).await?;
            let forward = Forward::open(pods, &namespace, pod).await?;
            (forward.addr.to_string(), true, Some(forward))
        }
    };
    let secret = cache.status.and_then(|s| s.credentials_secret);
    let from_environment = std::env::var(credentials::USER).is_ok();
    let login = match secret {
        Some(secret) if !from_environment => {
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
        Some((user, password)) => {
            credentials::docker_config(&[host.as_str()], Some(&user), Some(&password))
        }
        None => credentials::from_environment(&[host.as_str()], direction),
    }
    .map_err(AccessError::Credentials)?;
    Ok(Reached {
        host,
        plain_http,
        credentials,
        _forward: forward,
    })
}

async fn ready_pod(
    client: &kube::Client,
    pods: &Api<Pod>,
    namespace: &str,
    name: &str,
    deployment: &str,
) -> Result<String, AccessError> {
    let no_pod = || AccessError::NoPod {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        deployment: deployment.to_owned(),
    };
    let pods_error = |source| AccessError::Pods {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let selector = Api::<Deployment>::namespaced(client.clone(), namespace)
        .get_opt(deployment)
        .await
        .map_err(pods_error)?
        .and_then(|d| d.spec)
        .and_then(|s| s.selector.match_labels)
        .ok_or_else(no_pod)?;
    let selector: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let listed = pods
        .list(&ListParams::default().labels(&selector.join(",")))
        .await
        .map_err(pods_error)?;
    listed
        .items
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .find(|pod| {
            pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .and_then(|pod| pod.metadata.name)
        .ok_or_else(no_pod)
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
}
