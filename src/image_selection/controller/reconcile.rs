//! The reconciler: gathers a policy's inputs (artifact through the memo and the registry seam,
//! pull Secret, node inventory from the stores), calls the pure status computation, and applies
//! the result by server-side apply only when it differs, publishing Events for its transitions.
//! Only the leader gets this far; every decision lives in `status`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::Error;
use super::artifact_fetch::resolve;
use super::context::Context;
use super::resolution_memory::Outcome;
use super::schedule::DEFAULT_REFRESH;
use super::status_write::{publish, update_policy_gauges, write_status};
use super::triggers::Interest;
use crate::api::ImageSelectionPolicy;
use crate::api::parse_duration;
use crate::image_selection::planner::is_managed;
use crate::image_selection::resolution::Limits;
use crate::image_selection::resolution::Platforms;
use crate::image_selection::resolution::{ArtifactState, Inputs, compute};
use tracing::Instrument;

use crate::telemetry::{Controller, ReconcileResult, error_chain, reconcile_span};

/// How soon a managed policy whose share is busy is looked at again.
const SHARE_BUSY: Duration = Duration::from_secs(2);

/// Reconciles one policy (the kube-runtime entry point).
pub(super) async fn reconcile(
    policy: Arc<ImageSelectionPolicy>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
    if !ctx.cluster.leadership.is_leader() {
        ctx.metrics
            .reconciled(Controller::ImageSelection, ReconcileResult::NotLeader, 0.0);
        return Ok(Action::await_change());
    }
    let name = policy.name_any();
    let result = reconcile_policy(&policy, &name, &ctx)
        .instrument(reconcile_span(Controller::ImageSelection))
        .await;
    let seconds = started.elapsed().as_secs_f64();
    match &result {
        Ok((_, artifact_ok)) => {
            ctx.api_succeeded(&name);
            let label = if *artifact_ok {
                ctx.metrics.reconcile_succeeded(Controller::ImageSelection);
                ReconcileResult::Ok
            } else {
                ReconcileResult::ArtifactError
            };
            ctx.metrics
                .reconciled(Controller::ImageSelection, label, seconds);
        }
        Err(_) => {
            ctx.metrics
                .reconciled(Controller::ImageSelection, ReconcileResult::Error, seconds)
        }
    }
    tracing::debug!(policy = %name, seconds, "reconciled");
    result.map(|(action, _)| action)
}

/// Requeues a policy whose reconcile failed against the apiserver, with a growing backoff.
pub(super) fn error_policy(
    policy: Arc<ImageSelectionPolicy>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
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
    let managed = is_managed(policy);
    let existing: Vec<String> = ctx.policies.state().iter().map(|p| p.name_any()).collect();
    ctx.forget_except(&existing);

    let refresh = policy
        .spec
        .artifact
        .refresh_interval
        .as_deref()
        .and_then(parse_duration)
        .unwrap_or(DEFAULT_REFRESH);
    let Some(memo) = resolve(policy, name, ctx, refresh).await? else {
        // A managed policy whose share is busy: no place held meanwhile.
        return Ok((Action::requeue(SHARE_BUSY), true));
    };
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
        .map(|f| f.resolved.reads())
        .or_else(|| policy.status.as_ref().and_then(|s| s.class_keys.clone()));
    let interest = reads.map(|reads| Interest {
        node_selector: policy.spec.node_selector.clone(),
        reads,
    });
    ctx.set_interest(name, interest.clone());
    // Without an artifact nothing is evaluated: no node label needs copying.
    let nodes = match &interest {
        Some(interest) => ctx.node_inputs(interest),
        None => Arc::default(),
    };
    let now = now();
    let computed = compute(&Inputs {
        generation: policy.metadata.generation,
        spec: &policy.spec,
        artifact,
        nodes: &nodes,
        platforms,
        previous: policy.status.as_ref(),
        now: &now,
        limits: if managed {
            Limits::MANAGED
        } else {
            Limits::WRITTEN
        },
    });
    let current = policy.status.as_ref() == Some(&computed.status)
        || ctx.written(name).as_ref() == Some(&computed.status);
    if !current {
        // Leadership may have moved while the artifact was fetched.
        if !ctx.cluster.leadership.is_leader() {
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

/// Now, to the second: the apiserver stores times to the second, so a finer time would make
/// every computed status differ from the stored one.
fn now() -> Time {
    let seconds = Timestamp::now().as_second();
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_has_whole_seconds() {
        assert_eq!(now().0.subsec_nanosecond(), 0);
    }
}
