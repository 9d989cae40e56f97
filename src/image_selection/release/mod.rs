//! The release controller (leader only): pods carrying the held label are watched (trimmed by
//! [`held`]) and each is released once the planner can decide it
//! ([`crate::image_selection::planner::release`]): when it appears, when the planner's index is
//! rebuilt, when its hold bound passes, and all of them on becoming leader. The decision is one
//! JSON patch guarded by the resourceVersion it was planned from; an invalid patch follows the
//! hold failure rule, a conflict is planned again, and each outcome is an Event on the pod. A pod
//! waiting for an `image-ref` no policy uses gets a managed policy within the quotas ([`adopt`])
//! unless that is turned off. Only namespaces the webhook covers are acted on ([`coverage`]).

mod adopt;
mod collect;
mod coverage;
mod held;
#[cfg(test)]
pub(crate) use held::trim;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};

use super::feed::SharedIndex;
use crate::api::ImageSelectionPolicy;
use crate::api::pod::HELD_LABEL;
use crate::cluster::ClusterView;
use crate::cluster::UNTRUSTED_LIST_PAGE;
use crate::cluster::{EventReporter, Notice, Notices, queue};
use crate::cluster::{Reflected, held_for, held_pods_controller, reflect};
use crate::image_selection::planner::gate_at;
use crate::image_selection::planner::{HoldRules, Release, failed, release};
use crate::process::{Shutdown, Tasks, until};
use crate::telemetry::error_chain;
use adopt::{Adopter, adopt};
use coverage::Coverage;

/// Held pods released at once (each is one patch and one Event).
const CONCURRENCY: u16 = 16;
/// How soon to look again after the pod changed under our patch.
const AFTER_CONFLICT: Duration = Duration::from_millis(200);

/// A release failed against the apiserver.
#[derive(Debug, thiserror::Error)]
pub(super) enum Error {
    /// The policy ocifit takes charge of could not be created.
    #[error("failed to create ImageSelectionPolicy {name}")]
    CreatePolicy {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The pod could not be patched.
    #[error("failed to release pod {namespace}/{name}")]
    Patch {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

pub(super) struct ReleaseDeps {
    /// The cluster view (its leadership decides who releases).
    pub cluster: ClusterView,
    /// The planner's index, the same the route plans from.
    pub index: SharedIndex,
    /// Publishes the Events on the pods.
    pub reporter: EventReporter,
    /// The hold bound and failure rule.
    pub rules: HoldRules,
    /// The policies (managed ones are counted, and collected once unused).
    pub policies: Reflected<ImageSelectionPolicy>,
    /// The MutatingWebhookConfiguration whose `pods.ocifit.io` webhook decides where to act.
    pub webhook_configuration: String,
    /// ocifit's own namespace (never acted in).
    pub own_namespace: String,
}

/// Shared by every release.
struct ReleaseContext {
    cluster: ClusterView,
    index: SharedIndex,
    /// Events on the pods, queued: a release never waits for its Event.
    notices: Notices,
    rules: HoldRules,
    adopter: Adopter,
    coverage: Coverage,
}

/// The held-pod watch, the controller over it, the queue of its Events and, when ocifit takes
/// charge of policies, their collection, as tasks.
pub(super) fn run(parts: ReleaseDeps, shutdown: &Shutdown) -> Tasks {
    // Every notice is published (no window): each is about one held pod.
    let (notices, publisher) = queue(parts.reporter, Duration::ZERO);
    let collection = parts.rules.take_charge.then(|| {
        collect::collect(
            parts.cluster.clone(),
            parts.policies.clone(),
            parts.rules.collect_after,
        )
    });
    let context = ReleaseContext {
        coverage: Coverage::new(
            parts.cluster.client.clone(),
            parts.webhook_configuration,
            parts.own_namespace,
        ),
        cluster: parts.cluster,
        index: parts.index,
        notices,
        rules: parts.rules,
        adopter: Adopter::new(parts.policies.store(), parts.rules.quota),
    };
    let (pods, watch) = reflect(
        watcher(
            Api::<Pod>::all(context.cluster.client.clone()),
            watcher::Config::default()
                .labels(&format!("{HELD_LABEL}=true"))
                .page_size(UNTRUSTED_LIST_PAGE),
        )
        .backoff(crate::process::watch_backoff())
        .modify(held::trim),
        "held pods",
    );
    let mut tasks: Tasks = vec![
        ("held pod events", until(shutdown.clone(), publisher)),
        ("held pod watch", until(shutdown.clone(), watch)),
        (
            "held pod release",
            controller(context, &pods, shutdown.clone().wait()),
        ),
    ];
    if let Some(collection) = collection {
        tasks.push((
            "managed policy collection",
            until(shutdown.clone(), collection),
        ));
    }
    tasks
}

fn controller(
    context: ReleaseContext,
    pods: &Reflected<Pod>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> BoxFuture<'static, ()> {
    let again =
        futures_util::stream::select(context.cluster.leadership.gained(), context.index.changes());
    held_pods_controller(
        pods,
        |pod| gate_at(pod).is_some(),
        again,
        shutdown,
        (reconcile, error_policy, Arc::new(context)),
        (CONCURRENCY, "held pod release event"),
    )
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<ReleaseContext>) -> Result<Action, Error> {
    if !ctx.cluster.leadership.is_leader()
        || gate_at(&pod).is_none()
        || pod.metadata.deletion_timestamp.is_some()
    {
        return Ok(Action::await_change());
    }
    let namespace = pod.namespace().unwrap_or_default();
    if !ctx.coverage.covers(&namespace).await {
        tracing::debug!(pod = %pod.name_any(), %namespace, "held pod in a namespace the webhook does not cover: left alone");
        return Ok(Action::await_change());
    }
    let waited = held_for(&pod);
    let index = ctx.index.load();
    let decided = release(index.as_deref(), &pod, ctx.rules, waited);
    let done = match send(&ctx, &pod, &decided).await? {
        Sent::Done => decided,
        Sent::Conflict => return Ok(Action::requeue(AFTER_CONFLICT)),
        Sent::Gone => return Ok(Action::await_change()),
        Sent::Invalid(message) => {
            let why = format!("the apiserver refused the release: {message}");
            let fallback = failed(&pod, ctx.rules, &why);
            match send(&ctx, &pod, &fallback).await? {
                Sent::Done => fallback,
                Sent::Conflict => return Ok(Action::requeue(AFTER_CONFLICT)),
                Sent::Gone => return Ok(Action::await_change()),
                Sent::Invalid(message) => {
                    tracing::warn!(pod = %pod.name_any(), %message, "held pod cannot be updated");
                    return Ok(Action::await_change());
                }
            }
        }
    };
    if let Some(policy) = &done.adopt {
        adopt(
            &ctx.cluster.client,
            &ctx.adopter,
            &ctx.notices,
            &pod,
            policy,
        )
        .await?;
    }
    if let Some(note) = done.event {
        tracing::info!(pod = %pod.name_any(), namespace = ?pod.namespace(), reason = note.reason, "held pod");
        ctx.notices.send(Notice {
            on: pod.object_ref(&()),
            warning: note.warning,
            reason: note.reason,
            action: "Release",
            note: note.note,
        });
    }
    Ok(done.wait.map_or_else(Action::await_change, Action::requeue))
}

/// How the apiserver took a release.
#[derive(Debug, PartialEq, Eq)]
enum Sent {
    /// Applied, or nothing to send.
    Done,
    /// The pod changed since it was planned.
    Conflict,
    Gone,
    /// Refused as invalid, with the apiserver's message.
    Invalid(String),
}

async fn send(ctx: &ReleaseContext, pod: &Pod, release: &Release) -> Result<Sent, Error> {
    let Some(patch) = &release.patch else {
        return Ok(Sent::Done);
    };
    let api: Api<Pod> = Api::namespaced(
        ctx.cluster.client.clone(),
        &pod.namespace().unwrap_or_default(),
    );
    apply(&api, pod, patch).await
}

/// Sends `patch`, planned from `pod`. A 422 is an invalid release only if the pod is unchanged:
/// the patch's `test` of the gate also fails with 422 (before the resourceVersion's 409) when the
/// gates moved, and that pod is planned again rather than given the failure rule.
async fn apply(api: &Api<Pod>, pod: &Pod, patch: &json_patch::Patch) -> Result<Sent, Error> {
    let failed = |source| Error::Patch {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        source,
    };
    let refused = match api
        .patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(patch.clone()),
        )
        .await
    {
        Ok(_) => return Ok(Sent::Done),
        Err(kube::Error::Api(status)) if status.code == 409 => return Ok(Sent::Conflict),
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Sent::Gone),
        Err(kube::Error::Api(status)) if status.code == 422 => status.message,
        Err(source) => return Err(failed(source)),
    };
    match api
        .get_metadata_opt(&pod.name_any())
        .await
        .map_err(failed)?
    {
        None => Ok(Sent::Gone),
        Some(live) if live.metadata.resource_version != pod.metadata.resource_version => {
            tracing::debug!(pod = %pod.name_any(), %refused, "held pod changed under its release: planned again");
            Ok(Sent::Conflict)
        }
        Some(_) => Ok(Sent::Invalid(refused)),
    }
}

fn error_policy(_pod: Arc<Pod>, error: &Error, _ctx: Arc<ReleaseContext>) -> Action {
    tracing::warn!(error = %error_chain(error), "held pod release failed");
    Action::requeue(Duration::from_secs(5))
}

#[cfg(test)]
mod tests;
