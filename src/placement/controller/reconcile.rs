//! One gated pod, reconciled (leader only): its policy from the store (gone or unusable: the pod
//! is released without a constraint, never forgotten), the policy asked again whether it selects
//! the pod (the label is the pod author's to write: a pod naming a policy that does not select it
//! is released without a constraint, nothing inspected), its images inspected, the release plan
//! written in one merge patch of what it changed (conditional on the version it was planned
//! from: the store holds trimmed pods), and the plan's Events published on the pod and on its
//! owner. A pod waiting for its next inspection waits, whatever changed it meanwhile (its own
//! write first). A pod without ocifit's gate is left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::context::{Context, Unusable};
use super::context::{inspections, pull_secrets};
use crate::api::PlacementPolicy;
use crate::api::placement_pod::{Outcome, POLICY_LABEL, SCHEDULING_GATE};
use crate::cluster::{Notice, Notices};
use crate::placement::planner::Policy;
use crate::placement::planner::images;
use crate::placement::planner::release_patch;
use crate::placement::planner::{Namespace, NotSelected, recheck};
use crate::placement::planner::{Note, ReleaseInputs, ReleasePlan, plan_release, without_policy};
use crate::placement::read_labels;
use tracing::Instrument;

use crate::telemetry::{Controller, ReconcileResult, reconcile_span};

/// How soon to look again after the pod changed under our update.
const AFTER_CONFLICT: Duration = Duration::from_millis(200);
/// How soon to look again at a pod whose namespace has all its reconcile slots in use, should
/// the wake when one is given back never come.
const NAMESPACE_BUSY: Duration = Duration::from_secs(10);
/// When a pod reconciled before the policies were first compiled is looked at again (an empty
/// set then means "not read yet": the pod's policy would seem gone and the pod be released).
const POLICIES_UNREAD: Duration = Duration::from_secs(1);

/// A reconcile failed against the apiserver (registry problems are Events and retries, not
/// errors).
#[derive(Debug, thiserror::Error)]
pub(super) enum Error {
    /// The pod could not be updated.
    #[error("failed to update pod {namespace}/{name}")]
    UpdatePod {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The update could not be written as a patch.
    #[error("failed to encode the update of pod {namespace}/{name}")]
    EncodePatch {
        namespace: String,
        name: String,
        #[source]
        source: serde_json::Error,
    },
    /// The policy the pod names, not in the store, could not be read from the apiserver.
    #[error("failed to read placement policy {name}")]
    ReadPolicy {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The pod's namespace could not be read (its labels, for the policy's namespace selector).
    #[error("failed to read namespace {namespace}")]
    ReadNamespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

/// Whether ocifit's gate is on `pod`.
pub(super) fn gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|gate| gate.name == SCHEDULING_GATE))
}

/// Reconciles one pod (the kube-runtime entry point), counted with its duration.
pub(super) async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.cluster.leadership.is_leader() {
        ctx.metrics
            .reconciled(Controller::Placement, ReconcileResult::NotLeader, 0.0);
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let result = reconcile_pod(pod, Arc::clone(&ctx))
        .instrument(reconcile_span(Controller::Placement))
        .await;
    let seconds = started.elapsed().as_secs_f64();
    ctx.metrics
        .reconciled(Controller::Placement, ReconcileResult::of(&result), seconds);
    result
}

async fn reconcile_pod(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    let uid = pod.uid().unwrap_or_default();
    if !gated(&pod) || pod.metadata.deletion_timestamp.is_some() {
        ctx.retries().forget(&uid);
        return Ok(Action::await_change());
    }
    if !ctx.policies.stored() {
        return Ok(Action::requeue(POLICIES_UNREAD));
    }
    let images = images(&pod);
    if let Some(wait) = ctx.retries().wait(&uid, &images, Instant::now()) {
        return Ok(Action::requeue(wait));
    }
    let namespace = pod.namespace().unwrap_or_default();
    let Some(_slot) = ctx
        .slots
        .try_take(&namespace, &ObjectRef::from_obj(pod.as_ref()))
    else {
        // Woken when a slot of its namespace is given back; this only if a wake were lost.
        return Ok(Action::requeue(NAMESPACE_BUSY));
    };
    let name = pod.labels().get(POLICY_LABEL).cloned().unwrap_or_default();
    let plan = match named_policy(&ctx, &name).await? {
        Err(why) => without_policy(&pod, &why.to_string()),
        Ok(policy) => match selects(&ctx, &pod, &policy).await? {
            Err(why) => without_policy(&pod, &why.to_string()),
            Ok(()) => plan(&ctx, &pod, &policy).await,
        },
    };
    // The stored pod is trimmed (see `held`): only what the plan changed is sent.
    let patch = release_patch(&pod, &plan.pod).map_err(|source| Error::EncodePatch {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        source,
    })?;
    if let Some(patch) = patch {
        let api: Api<Pod> = Api::namespaced(
            ctx.cluster.client.clone(),
            pod.namespace().as_deref().unwrap_or("default"),
        );
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Json::<()>(patch),
            )
            .await
        {
            Ok(_) => {}
            // The pod changed since we read it: the watch brings the new one.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                return Ok(Action::requeue(AFTER_CONFLICT));
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Ok(Action::await_change());
            }
            Err(source) => {
                return Err(Error::UpdatePod {
                    namespace: pod.namespace().unwrap_or_default(),
                    name: pod.name_any(),
                    source,
                });
            }
        }
    }
    if let Some(outcome) = plan.outcome {
        if outcome != Outcome::Held {
            ctx.releases.add(&name, 1);
        }
        ctx.metrics.placement_decided(outcome.as_str());
        ctx.metrics.reconcile_succeeded(Controller::Placement);
        tracing::info!(pod = %pod.name_any(), namespace = ?pod.namespace(), %outcome, "placement decided");
    }
    publish(&ctx.notices, &pod, &plan.events, "Place");
    match plan.requeue {
        Some(wait) => {
            let now = Instant::now();
            ctx.retries().schedule(&uid, images, now + wait, now);
            Ok(Action::requeue(wait))
        }
        None => {
            ctx.retries().forget(&uid);
            Ok(Action::await_change())
        }
    }
}

/// The usable policy `name`, or why there is none. A policy the store does not hold is read
/// from the apiserver before the pod is released as if it were gone: the store lags a policy
/// created a moment before its pods, longer while its watch is retrying.
async fn named_policy(ctx: &Context, name: &str) -> Result<Result<Policy, Unusable>, Error> {
    match ctx.usable_policy(name) {
        Err(Unusable::Gone { .. }) => {}
        known => return Ok(known),
    }
    let api: Api<PlacementPolicy> = Api::all(ctx.cluster.client.clone());
    let read = api
        .get_opt(name)
        .await
        .map_err(|source| Error::ReadPolicy {
            name: name.to_owned(),
            source,
        })?;
    Ok(match read {
        None => Err(Unusable::Gone { name: name.into() }),
        Some(stored) => Policy::compile(&stored).map_err(|source| Unusable::Invalid {
            name: name.into(),
            source,
        }),
    })
}

/// Whether `policy` selects the pod as admission would have: `Err` says why not.
async fn selects(
    ctx: &Context,
    pod: &Pod,
    policy: &Policy,
) -> Result<Result<(), NotSelected>, Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let labels: BTreeMap<String, String> = match ctx.stored_namespace_labels(&namespace) {
        Some(labels) => labels,
        // Not kept in memory (no route), or created a moment ago: read it.
        None => read_labels(&ctx.cluster.client, &namespace)
            .await
            .map_err(|source| Error::ReadNamespace {
                namespace: namespace.clone(),
                source,
            })?,
    };
    Ok(recheck(
        pod,
        Namespace {
            name: &namespace,
            labels: &labels,
        },
        &ctx.own_namespace,
        policy,
    ))
}

/// Reads the pod's Secrets and images and plans its release.
async fn plan(ctx: &Context, pod: &Pod, policy: &Policy) -> ReleasePlan {
    let secrets = pull_secrets(&ctx.cluster.client, &ctx.cluster.secrets(), pod).await;
    let inspected = inspections(
        &ctx.inspector,
        pod,
        policy,
        &secrets,
        &ctx.own_credentials,
        &ctx.metrics,
    )
    .await;
    let tainted: BTreeSet<String> = ctx.tainted();
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or_else(Timestamp::now, |time| time.0);
    let since_creation = Timestamp::now()
        .duration_since(created)
        .try_into()
        .unwrap_or(Duration::ZERO);
    let mut plan = plan_release(
        pod,
        &inspected,
        ReleaseInputs {
            policy,
            tainted: &tainted,
            since_creation,
        },
    );
    plan.events
        .extend(secrets.problems.iter().map(|problem| Note {
            warning: true,
            reason: "PullSecretUnusable",
            message: problem.to_string(),
        }));
    plan
}

/// Each note queued as an Event on the pod and on its controlling owner (its note naming the
/// pod), for `action`.
pub(super) fn publish(notices: &Notices, pod: &Pod, notes: &[Note], action: &'static str) {
    let on_pod = pod.object_ref(&());
    let owner = pod
        .owner_references()
        .iter()
        .find(|owner| owner.controller == Some(true))
        .map(|owner| ObjectReference {
            api_version: Some(owner.api_version.clone()),
            kind: Some(owner.kind.clone()),
            name: Some(owner.name.clone()),
            namespace: pod.namespace(),
            uid: Some(owner.uid.clone()),
            ..ObjectReference::default()
        });
    for note in notes {
        for on in std::iter::once(&on_pod).chain(owner.as_ref()) {
            let prefix = if std::ptr::eq(on, &on_pod) {
                String::new()
            } else {
                format!("pod {}: ", pod.name_any())
            };
            notices.send(Notice {
                on: on.clone(),
                warning: note.warning,
                reason: note.reason,
                action,
                note: format!("{prefix}{}", note.message),
            });
        }
    }
}

/// A failed reconcile: retried soon.
pub(super) fn error_policy(_pod: Arc<Pod>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %crate::telemetry::error_chain(error), "placement reconcile failed");
    Action::requeue(Duration::from_secs(5))
}
