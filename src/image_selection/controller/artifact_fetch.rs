//! Gathering a policy's artifact: from the per-policy memo while it is fresh, else through the
//! registry seam with its pull Secret's credentials. The Secret is read with one `get` every pass
//! (nothing watches Secrets) and its resourceVersion is part of the request, so a changed Secret
//! is used at the next pass; a missing, malformed or not-allowed one is a condition, not an error.
//! A policy ocifit took charge of resolves within its share and deadline; what went wrong goes to
//! ocifit's log and its status says only that (every tenant reads the policy, and the registry's
//! words would let a pod author probe other hosts).

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::Error;
use super::context::Context;
use super::resolution_memory::Memo;
use super::{PullSecret, Request, Wanted};
use crate::api::{ImageSelectionPolicy, Reason};
use crate::cluster::SecretRead;
use crate::image_selection::planner::is_managed;
use crate::image_selection::resolution::Failure;

/// The key of a dockerconfigjson Secret's content.
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";
/// The type of a dockerconfigjson Secret.
const DOCKER_CONFIG_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// The policy's artifact: from the memo while it is fresh, else resolved again; `None` when it
/// is a managed policy's turn to resolve and its share has no place free.
pub(super) async fn resolve(
    policy: &ImageSelectionPolicy,
    name: &str,
    ctx: &Context,
    refresh: Duration,
) -> Result<Option<Memo>, Error> {
    let previous = ctx.memo(name);
    let prepared = match wanted(policy) {
        Some(wanted) => prepare(policy, wanted, ctx).await?,
        None => Err((
            Request {
                wanted: Wanted::Reference(String::new()),
                pull_secret: None,
                managed: false,
            },
            Failure {
                reason: Reason::InvalidReference,
                message: "the policy names neither artifact.ref nor artifact.candidates".to_owned(),
            },
        )),
    };
    let now = Instant::now();
    let request = match prepared {
        Ok(request) => request,
        // Problems found before the registry (Secret, spec) are checked on every pass: cheap.
        Err((request, failure)) => {
            return Ok(Some(Memo::after(
                previous.as_ref(),
                request,
                Err(failure),
                now,
            )));
        }
    };
    if let Some(memo) = previous
        .as_ref()
        .filter(|m| !m.stale_for(&request, refresh, &ctx.settings.backoff, now))
    {
        return Ok(Some(memo.clone()));
    }
    let result = if request.managed {
        let Ok(_place) = ctx.managed_places.try_acquire() else {
            return Ok(None);
        };
        within(ctx.settings.managed.deadline, ctx.source.fetch(&request)).await
    } else {
        ctx.source.fetch(&request).await
    };
    ctx.metrics.artifact_fetched(match &result {
        Ok(_) => "Ok",
        Err(failure) => failure.reason.as_str(),
    });
    if let Err(failure) = &result {
        tracing::info!(policy = %name, artifact = %request.wanted, reason = %failure.reason, message = %failure.message, "artifact not resolved");
    }
    let result = match result {
        Err(failure) if request.managed => Err(told(&failure)),
        other => other,
    };
    Ok(Some(Memo::after(
        previous.as_ref(),
        request,
        result,
        Instant::now(),
    )))
}

/// `fetch`, or a failure once `deadline` has passed.
async fn within<T>(
    deadline: Duration,
    fetch: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    tokio::time::timeout(deadline, fetch)
        .await
        .unwrap_or_else(|_| {
            Err(Failure {
                reason: Reason::RegistryUnavailable,
                message: format!(
                    "the resolution did not finish within {}s",
                    deadline.as_secs()
                ),
            })
        })
}

/// What a managed policy's status says of `failure`: the same words whatever a host answered, so
/// no reader learns how another host answers; only what is decided before any connection (the
/// reference, the address fence) keeps its reason.
fn told(failure: &Failure) -> Failure {
    let (reason, message) = match failure.reason {
        Reason::InvalidReference => (
            Reason::InvalidReference,
            "the image-ref is not a valid image reference",
        ),
        Reason::RegistryNotAllowed => (
            Reason::RegistryNotAllowed,
            "the registry is not one pod-named artifacts may be read from",
        ),
        _ => (
            Reason::RegistryUnavailable,
            "the artifact could not be read anonymously (the cause is in ocifit's log, not \
             here: every tenant reads this policy)",
        ),
    };
    Failure {
        reason,
        message: message.to_owned(),
    }
}

/// What the policy's compatibility information is read from (the schema makes `ref` and
/// `candidates` exclusive; `ref` wins should both reach here).
fn wanted(policy: &ImageSelectionPolicy) -> Option<Wanted> {
    let artifact = &policy.spec.artifact;
    match (&artifact.reference, &artifact.candidates) {
        (Some(reference), _) => Some(Wanted::Reference(reference.clone())),
        (None, Some(candidates)) => Some(Wanted::Candidates(candidates.clone())),
        (None, None) => None,
    }
}

/// The request for `wanted` with the pull Secret's credentials, or why it cannot be made.
async fn prepare(
    policy: &ImageSelectionPolicy,
    wanted: Wanted,
    ctx: &Context,
) -> Result<Result<Request, (Request, Failure)>, Error> {
    if is_managed(policy) {
        return Ok(Ok(Request {
            wanted,
            pull_secret: None,
            managed: true,
        }));
    }
    let Some(secret_ref) = &policy.spec.artifact.pull_secret_ref else {
        return Ok(Ok(Request {
            wanted,
            pull_secret: None,
            managed: false,
        }));
    };
    let (namespace, secret_name) = (&secret_ref.namespace, &secret_ref.name);
    let failed = |reason: Reason, message: String| {
        Ok(Err((
            Request {
                wanted: wanted.clone(),
                pull_secret: None,
                managed: false,
            },
            Failure { reason, message },
        )))
    };
    let invalid = |message: String| failed(Reason::SecretInvalid, message);
    let secrets = ctx.cluster.secrets();
    let secret = match secrets.get(namespace, secret_name).await {
        Ok(SecretRead::Found(secret)) => secret,
        Ok(SecretRead::Missing) => {
            return invalid(format!("pull secret {namespace}/{secret_name} not found"));
        }
        // Says nothing of the Secret itself: whether it exists there is not the policy's to know.
        Ok(SecretRead::NotAllowed) => {
            return failed(
                Reason::SecretNotAllowed,
                format!(
                    "pull secrets are read only in the namespaces {} (--pull-secret-namespaces), \
                     not in {namespace}",
                    secrets.allowed()
                ),
            );
        }
        Ok(SecretRead::Forbidden(message)) => {
            return invalid(format!(
                "pull secret {namespace}/{secret_name} cannot be read: {message}"
            ));
        }
        Err(source) => {
            return Err(Error::ReadSecret {
                namespace: namespace.clone(),
                name: secret_name.clone(),
                source,
            });
        }
    };
    match docker_config_of(&secret) {
        Ok(json) => Ok(Ok(Request {
            wanted,
            managed: false,
            pull_secret: Some(PullSecret {
                key: format!(
                    "{namespace}/{secret_name}@{}",
                    secret.resource_version().unwrap_or_default()
                ),
                docker_config_json: json,
            }),
        })),
        Err(why) => invalid(format!("pull secret {namespace}/{secret_name} {why}")),
    }
}

/// What is wrong with a pull Secret (its message follows the Secret's name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NotDockerConfig {
    #[error("has type {0}, not {DOCKER_CONFIG_TYPE}")]
    Type(String),
    #[error("has no {DOCKER_CONFIG_KEY} key")]
    NoKey,
}

/// The `.dockerconfigjson` of a Secret, or what is wrong with it.
fn docker_config_of(secret: &Secret) -> Result<Vec<u8>, NotDockerConfig> {
    let kind = secret.type_.as_deref().unwrap_or("Opaque");
    if kind != DOCKER_CONFIG_TYPE {
        return Err(NotDockerConfig::Type(kind.to_owned()));
    }
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(DOCKER_CONFIG_KEY))
        .map(|bytes| bytes.0.clone())
        .ok_or(NotDockerConfig::NoKey)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(type_: Option<&str>, data: &[(&str, &[u8])]) -> Secret {
        Secret {
            type_: type_.map(Into::into),
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn a_dockerconfigjson_secret_yields_its_content() {
        let s = secret(
            Some(DOCKER_CONFIG_TYPE),
            &[(DOCKER_CONFIG_KEY, b"{\"auths\":{}}")],
        );
        assert_eq!(docker_config_of(&s).unwrap(), b"{\"auths\":{}}");
    }

    #[test]
    fn other_secrets_say_what_is_wrong() {
        let opaque = secret(None, &[(DOCKER_CONFIG_KEY, b"{}")]);
        assert_eq!(
            docker_config_of(&opaque).unwrap_err().to_string(),
            "has type Opaque, not kubernetes.io/dockerconfigjson"
        );
        let empty = secret(Some(DOCKER_CONFIG_TYPE), &[]);
        assert_eq!(
            docker_config_of(&empty).unwrap_err().to_string(),
            "has no .dockerconfigjson key"
        );
    }

    #[tokio::test]
    async fn a_resolution_past_its_deadline_fails_as_unavailable() {
        let silent = std::future::pending::<Result<(), Failure>>();
        let failure = within(Duration::from_millis(20), silent).await.unwrap_err();
        assert_eq!(failure.reason, Reason::RegistryUnavailable);
        assert_eq!(failure.message, "the resolution did not finish within 0s");
        let answered = within(Duration::from_secs(60), async { Ok::<_, Failure>(7) }).await;
        assert_eq!(answered, Ok(7));
    }

    #[test]
    fn a_managed_policy_tells_the_same_whatever_a_host_answered() {
        let failure = |reason, message: &str| Failure {
            reason,
            message: message.to_owned(),
        };
        let refused = told(&failure(
            Reason::RegistryUnavailable,
            "tcp connect error: 10.0.0.7:6379: Connection refused",
        ));
        let answered = told(&failure(Reason::NotFound, "10.0.0.7:8080 said 404: <html>"));
        let spoke = told(&failure(
            Reason::InvalidArtifact,
            "10.0.0.7:22 SSH-2.0-OpenSSH",
        ));
        assert_eq!(refused, answered);
        assert_eq!(refused, spoke);
        assert!(!refused.message.contains("10.0.0.7"), "{}", refused.message);
        let fenced = told(&failure(
            Reason::RegistryNotAllowed,
            "internal.example resolves to 10.0.0.7",
        ));
        assert_eq!(fenced.reason, Reason::RegistryNotAllowed);
        assert!(!fenced.message.contains("10.0.0.7"), "{}", fenced.message);
    }
}
