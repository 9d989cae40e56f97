//! The release of held steps (leader only): every pod carrying the held label is watched (a label
//! selector, trimmed to what the decision reads), and decided ([`held::release`]) when it
//! appears, whenever a cache changes, when its hold bound passes, and all of them on becoming
//! leader. The decision is sent as the one guarded release patch (it tests the gate is where it
//! was read and carries the resourceVersion it was decided from); each outcome is an Event on the
//! pod.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, controller::Action, watcher};
use kube::{Api, Resource, ResourceExt};

use super::held::{self, HoldRules, wired_to};
use super::planner::CacheState;
use super::status::cache_state;
use crate::api::{ArtifactCache, step};
use crate::cluster::ClusterView;
use crate::cluster::held_at;
use crate::cluster::{EventReporter, Notice, Notices, queue};

use crate::cluster::UNTRUSTED_LIST_PAGE;
use crate::cluster::{Reflected, held_for, held_pods_controller, reflect};
use crate::process::{Shutdown, Tasks, until};
use crate::telemetry::error_chain;

/// Held steps released at once (each is one patch and one Event).
const CONCURRENCY: u16 = 16;
/// How soon to look again after the pod changed under our patch.
const AFTER_CONFLICT: Duration = Duration::from_millis(200);

/// The pod could not be patched.
#[derive(Debug, thiserror::Error)]
#[error("failed to release step {namespace}/{name}")]
pub(super) struct Error {
    namespace: String,
    name: String,
    #[source]
    source: kube::Error,
}

struct Context {
    cluster: ClusterView,
    caches: Store<ArtifactCache>,
    notices: Notices,
    rules: HoldRules,
}

/// The held-step watch, the controller over it and the queue of its Events, as tasks.
pub(super) fn run(
    cluster: ClusterView,
    caches: &Reflected<ArtifactCache>,
    reporter: EventReporter,
    rules: HoldRules,
    shutdown: &Shutdown,
) -> Tasks {
    let (notices, publisher) = queue(reporter, Duration::ZERO);
    let (pods, watch) = reflect(
        watcher(
            Api::<Pod>::all(cluster.client.clone()),
            watcher::Config::default()
                .labels(step::HELD_LABEL)
                .page_size(UNTRUSTED_LIST_PAGE),
        )
        .backoff(crate::process::watch_backoff())
        .modify(|pod| crate::cluster::trim(pod, &held::KEPT)),
        "held steps",
    );
    let context = Context {
        cluster,
        caches: caches.store(),
        notices,
        rules,
    };
    let again = futures_util::stream::select(
        context.cluster.leadership.gained(),
        caches.subscribe().map(|_| ()),
    );
    vec![
        ("held step events", until(shutdown.clone(), publisher)),
        ("held step watch", until(shutdown.clone(), watch)),
        (
            "held step release",
            controller(context, &pods, again, shutdown.clone().wait()),
        ),
    ]
}

fn controller(
    context: Context,
    pods: &Reflected<Pod>,
    again: impl futures_util::Stream<Item = ()> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> BoxFuture<'static, ()> {
    held_pods_controller(
        pods,
        |pod| held_at(pod, held::GATE).is_some(),
        again,
        shutdown,
        (reconcile, error_policy, Arc::new(context)),
        (CONCURRENCY, "held step release event"),
    )
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.cluster.leadership.is_leader() || pod.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let waited = held_for(&pod);
    let namespace = pod.namespace().unwrap_or_default();
    // A step wired to no cache is failed by the decision itself.
    let cache = wired_to(&pod).map_or(CacheState::Missing, |(name, _)| {
        let key = ObjectRef::<ArtifactCache>::new(name).within(&namespace);
        cache_state(ctx.caches.get(&key).as_deref())
    });
    let decided = held::release(&pod, &cache, ctx.rules, waited);
    if let Some(patch) = &decided.patch {
        let api: Api<Pod> = Api::namespaced(ctx.cluster.client.clone(), &namespace);
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Json::<()>(patch.clone()),
            )
            .await
        {
            Ok(_) => {}
            // 422: the patch's test failed (the gates moved); 409: the pod changed.
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 422 => {
                return Ok(Action::requeue(AFTER_CONFLICT));
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Ok(Action::await_change());
            }
            Err(source) => {
                return Err(Error {
                    namespace,
                    name: pod.name_any(),
                    source,
                });
            }
        }
    }
    if let Some(note) = decided.event {
        tracing::info!(pod = %pod.name_any(), %namespace, reason = note.reason, "held step");
        ctx.notices.send(Notice {
            on: pod.object_ref(&()),
            warning: note.warning,
            reason: note.reason,
            action: "Release",
            note: note.note,
        });
    }
    Ok(decided
        .wait
        .map_or_else(Action::await_change, Action::requeue))
}

fn error_policy(_pod: Arc<Pod>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error_chain(error), "held step release failed");
    Action::requeue(Duration::from_secs(5))
}
