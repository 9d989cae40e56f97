//! The reconciler: gathers a policy's inputs (artifact through the memo and the registry seam,
//! pull Secret, node inventory from the stores), calls the pure status computation, and applies
//! the result by server-side apply under the one field manager only when it differs, publishing
//! Events for its transitions (through the cluster view's reporter) and the policies-by-condition
//! gauges. Only the leader gets this far; every decision lives in `status`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};

use super::Error;
use super::artifact_fetch::resolve;
use super::context::Context;
use super::resolution_memory::DEFAULT_REFRESH;
use super::resolution_memory::Outcome;
use super::trackers::Interest;
use crate::api::parse_duration;
use crate::api::{FIELD_MANAGER, ImageSelectionPolicy, ImageSelectionPolicyStatus};
use crate::cluster::Notice;
use crate::image_selection::planner::is_managed;
use crate::image_selection::resolution::Platforms;
use crate::image_selection::resolution::StatusLimits;
use crate::image_selection::resolution::{
    ArtifactState, Event, EventKind, StatusInputs, policy_status,
};
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
    let computed = policy_status(&StatusInputs {
        generation: policy.metadata.generation,
        spec: &policy.spec,
        artifact,
        nodes: &nodes,
        platforms,
        previous: policy.status.as_ref(),
        now: &now,
        limits: if managed {
            StatusLimits::MANAGED
        } else {
            StatusLimits::WRITTEN
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

pub(super) async fn write_status(
    ctx: &Context,
    name: &str,
    status: &ImageSelectionPolicyStatus,
) -> Result<(), Error> {
    let api: Api<ImageSelectionPolicy> = Api::all(ctx.cluster.client.clone());
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

pub(super) async fn publish(ctx: &Context, policy: &ImageSelectionPolicy, event: &Event) {
    ctx.reporter
        .publish(Notice {
            on: policy.object_ref(&()),
            warning: event.kind == EventKind::Warning,
            reason: event.reason.as_str(),
            action: "Reconcile",
            note: event.note.clone(),
        })
        .await;
}

/// Policies by condition, from the store with this policy's new status.
pub(super) fn update_policy_gauges(ctx: &Context, name: &str, status: &ImageSelectionPolicyStatus) {
    let policies = ctx.policies.state();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_has_whole_seconds() {
        assert_eq!(now().0.subsec_nanosecond(), 0);
    }
}
