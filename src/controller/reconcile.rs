//! The reconciler: gathers a policy's inputs (artifact through the memo and the registry seam,
//! pull Secret, node inventory from the stores), calls the pure status computation, and applies
//! the result by server-side apply only when it differs, publishing Events for its transitions.
//! Only the leader gets this far; every decision lives in `status`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::{Api, Resource, ResourceExt};

use super::context::Context;
use super::inventory::node_inputs;
use super::memo::{Memo, Outcome};
use super::platform::Platforms;
use super::schedule::{DEFAULT_REFRESH, parse_duration};
use super::source::{PullSecret, Request};
use super::status::{ArtifactState, EventKind, Failure, Inputs, compute};
use super::triggers::Interest;
use crate::api::{FIELD_MANAGER, ImageSelectionPolicy, ImageSelectionPolicyStatus, Reason};
use crate::telemetry::ReconcileResult;

/// The key of a dockerconfigjson Secret's content.
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";
/// The type of a dockerconfigjson Secret.
const DOCKER_CONFIG_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// Kubernetes caps an Event's note at 1 kB.
const MAX_NOTE: usize = 1024;

/// A reconcile failed against the apiserver (artifact problems are status, not errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pull Secret could not be read (other than missing or forbidden).
    #[error("failed to read the pull secret {namespace}/{name}")]
    ReadSecret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The status could not be applied.
    #[error("failed to write the status of policy {name}")]
    WriteStatus {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Reconciles one policy (the kube-runtime entry point).
pub async fn reconcile(
    policy: Arc<ImageSelectionPolicy>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
    if !ctx.leadership.is_leader() {
        ctx.metrics.reconciled(ReconcileResult::NotLeader, 0.0);
        return Ok(Action::await_change());
    }
    let name = policy.name_any();
    let result = reconcile_policy(&policy, &name, &ctx).await;
    let seconds = started.elapsed().as_secs_f64();
    match &result {
        Ok((_, artifact_ok)) => {
            ctx.api_succeeded(&name);
            let label = if *artifact_ok {
                ReconcileResult::Ok
            } else {
                ReconcileResult::ArtifactError
            };
            ctx.metrics.reconciled(label, seconds);
        }
        Err(_) => ctx.metrics.reconciled(ReconcileResult::ApiError, seconds),
    }
    tracing::debug!(policy = %name, seconds, "reconciled");
    result.map(|(action, _)| action)
}

/// Requeues a policy whose reconcile failed against the apiserver, with a growing backoff.
pub fn error_policy(policy: Arc<ImageSelectionPolicy>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = policy.name_any();
    let failures = ctx.api_failed(&name);
    let wait = ctx.settings.backoff.after(failures, Duration::MAX);
    tracing::warn!(policy = %name, error = %error_chain(error), retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

async fn reconcile_policy(
    policy: &ImageSelectionPolicy,
    name: &str,
    ctx: &Context,
) -> Result<(Action, bool), Error> {
    let existing: Vec<String> = ctx
        .stores
        .policies
        .state()
        .iter()
        .map(|p| p.name_any())
        .collect();
    ctx.forget_except(&existing);

    let refresh = policy
        .spec
        .artifact
        .refresh_interval
        .as_deref()
        .and_then(parse_duration)
        .unwrap_or(DEFAULT_REFRESH);
    let memo = resolve(policy, name, ctx, refresh).await?;
    let artifact_ok = matches!(memo.outcome, Outcome::Current(_));
    let serving = match &memo.outcome {
        Outcome::Current(fetched) => Some(fetched),
        Outcome::Failed(_) => memo.last_good.as_ref(),
    };
    let empty = Platforms::new();
    let platforms = serving.map_or(&empty, |f| &f.platforms);
    let artifact = match &memo.outcome {
        Outcome::Current(fetched) => ArtifactState::Current(&fetched.resolved),
        Outcome::Failed(failure) => ArtifactState::Failed {
            failure,
            last_good: memo.last_good.as_ref().map(|f| &f.resolved),
        },
    };
    // Record what the policy reads before reading the nodes, so a node change from here on
    // triggers a reconcile that sees it.
    let reads = serving
        .map(|f| f.resolved.artifact.reads())
        .or_else(|| policy.status.as_ref().and_then(|s| s.class_keys.clone()));
    ctx.set_interest(
        name,
        reads.map(|reads| Interest {
            node_selector: policy.spec.node_selector.clone(),
            reads,
        }),
    );
    let nodes = node_inputs(
        &ctx.stores.nodes.state(),
        &ctx.stores.node_features.state(),
        &ctx.settings.nfd_namespace,
    );
    let now = now();
    let computed = compute(&Inputs {
        generation: policy.metadata.generation,
        spec: &policy.spec,
        artifact,
        nodes: &nodes,
        platforms,
        previous: policy.status.as_ref(),
        now: &now,
    });
    let current = policy.status.as_ref() == Some(&computed.status)
        || ctx.written(name).as_ref() == Some(&computed.status);
    if !current {
        // Leadership may have moved while the artifact was fetched.
        if !ctx.leadership.is_leader() {
            return Ok((Action::await_change(), artifact_ok));
        }
        write_status(ctx, name, &computed.status).await?;
        ctx.wrote(name, computed.status.clone());
        for event in &computed.events {
            publish(ctx, policy, event).await;
        }
    }
    update_policy_gauges(ctx, name, &computed.status);
    let next = memo
        .next_check(refresh, &ctx.settings.backoff, Instant::now())
        .max(Duration::from_secs(1));
    ctx.remember(name, memo);
    Ok((Action::requeue(next), artifact_ok))
}

/// The policy's artifact: from the memo while it is fresh, else resolved again.
async fn resolve(
    policy: &ImageSelectionPolicy,
    name: &str,
    ctx: &Context,
    refresh: Duration,
) -> Result<Memo, Error> {
    let previous = ctx.memo(name);
    let reference = policy.spec.artifact.reference.clone();
    let prepared = match reference {
        Some(reference) => prepare(policy, reference, ctx).await?,
        None => Err((
            Request {
                reference: String::new(),
                pull_secret: None,
            },
            Failure {
                reason: Reason::Unsupported,
                message: "artifact.candidates is not supported by this controller yet; name one \
                          artifact with artifact.ref"
                    .to_owned(),
            },
        )),
    };
    let now = Instant::now();
    let request = match prepared {
        Ok(request) => request,
        // Problems found before the registry (Secret, spec) are checked on every pass: cheap.
        Err((request, failure)) => {
            return Ok(Memo::after(previous.as_ref(), request, Err(failure), now));
        }
    };
    if let Some(memo) = previous
        .as_ref()
        .filter(|m| !m.stale_for(&request, refresh, &ctx.settings.backoff, now))
    {
        return Ok(memo.clone());
    }
    let result = ctx.source.fetch(&request).await;
    ctx.metrics.artifact_fetched(match &result {
        Ok(_) => "Ok",
        Err(failure) => failure.reason.as_str(),
    });
    if let Err(failure) = &result {
        tracing::info!(policy = %name, reference = %request.reference, reason = %failure.reason, message = %failure.message, "artifact not resolved");
    }
    Ok(Memo::after(
        previous.as_ref(),
        request,
        result,
        Instant::now(),
    ))
}

/// The request for `reference` with the pull Secret's credentials, or why it cannot be made.
async fn prepare(
    policy: &ImageSelectionPolicy,
    reference: String,
    ctx: &Context,
) -> Result<Result<Request, (Request, Failure)>, Error> {
    let Some(secret_ref) = &policy.spec.artifact.pull_secret_ref else {
        return Ok(Ok(Request {
            reference,
            pull_secret: None,
        }));
    };
    let (namespace, secret_name) = (&secret_ref.namespace, &secret_ref.name);
    let failed = |message: String| {
        Ok(Err((
            Request {
                reference: reference.clone(),
                pull_secret: None,
            },
            Failure {
                reason: Reason::SecretInvalid,
                message,
            },
        )))
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let secret = match api.get_opt(secret_name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => return failed(format!("pull secret {namespace}/{secret_name} not found")),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            return failed(format!(
                "pull secret {namespace}/{secret_name} cannot be read: {}",
                status.message
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
            reference,
            pull_secret: Some(PullSecret {
                key: format!(
                    "{namespace}/{secret_name}@{}",
                    secret.resource_version().unwrap_or_default()
                ),
                docker_config_json: json,
            }),
        })),
        Err(why) => failed(format!("pull secret {namespace}/{secret_name} {why}")),
    }
}

/// The `.dockerconfigjson` of a Secret, or what is wrong with it.
fn docker_config_of(secret: &Secret) -> Result<Vec<u8>, String> {
    let kind = secret.type_.as_deref().unwrap_or("Opaque");
    if kind != DOCKER_CONFIG_TYPE {
        return Err(format!("has type {kind}, not {DOCKER_CONFIG_TYPE}"));
    }
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(DOCKER_CONFIG_KEY))
        .map(|bytes| bytes.0.clone())
        .ok_or_else(|| format!("has no {DOCKER_CONFIG_KEY} key"))
}

async fn write_status(
    ctx: &Context,
    name: &str,
    status: &ImageSelectionPolicyStatus,
) -> Result<(), Error> {
    let api: Api<ImageSelectionPolicy> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({
        "apiVersion": ImageSelectionPolicy::api_version(&()),
        "kind": ImageSelectionPolicy::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| Error::WriteStatus {
        name: name.to_owned(),
        source,
    })?;
    ctx.metrics.status_written();
    tracing::info!(policy = %name, classes = status.class_count, "status written");
    Ok(())
}

async fn publish(ctx: &Context, policy: &ImageSelectionPolicy, event: &super::status::Event) {
    let mut note = event.note.clone();
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    let kube_event = KubeEvent {
        type_: match event.kind {
            EventKind::Normal => EventType::Normal,
            EventKind::Warning => EventType::Warning,
        },
        reason: event.reason.as_str().to_owned(),
        note: Some(note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    match ctx
        .recorder
        .publish(&kube_event, &policy.object_ref(&()))
        .await
    {
        Ok(()) => ctx.metrics.event_published(),
        Err(err) => {
            tracing::warn!(policy = %policy.name_any(), error = %err, "failed to publish an event");
        }
    }
}

/// Policies by condition, from the store with this policy's new status.
fn update_policy_gauges(ctx: &Context, name: &str, status: &ImageSelectionPolicyStatus) {
    let policies = ctx.stores.policies.state();
    let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
    let statuses = policies
        .iter()
        .filter(|p| p.name_any() != name)
        .filter_map(|p| p.status.as_ref())
        .chain(std::iter::once(status));
    for s in statuses {
        for c in &s.conditions {
            *counts
                .entry((c.type_.clone(), c.status.clone()))
                .or_default() += 1;
        }
    }
    ctx.metrics.set_policies(
        counts
            .iter()
            .map(|((t, s), n)| ((t.as_str(), s.as_str()), *n)),
    );
}

/// Now, to the second: the apiserver stores times to the second, so a finer time would make
/// every computed status differ from the stored one.
fn now() -> Time {
    let seconds = Timestamp::now().as_second();
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// An error with its causes, `: `-separated, for logs and conditions; a cause whose text the
/// message already ends with is not repeated.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
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
            docker_config_of(&opaque).unwrap_err(),
            "has type Opaque, not kubernetes.io/dockerconfigjson"
        );
        let empty = secret(Some(DOCKER_CONFIG_TYPE), &[]);
        assert_eq!(
            docker_config_of(&empty).unwrap_err(),
            "has no .dockerconfigjson key"
        );
    }

    #[test]
    fn now_has_whole_seconds() {
        assert_eq!(now().0.subsec_nanosecond(), 0);
    }

    #[test]
    fn error_chains_name_every_cause() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let err = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&err), "outer: inner");
        #[derive(Debug, thiserror::Error)]
        #[error("at set 0: inner")]
        struct Repeating(#[source] std::io::Error);
        let err = Repeating(std::io::Error::other("inner"));
        assert_eq!(error_chain(&err), "at set 0: inner");
    }
}
