//! The ArtifactCache controller (leader only): each cache's desired objects ([`desired`]) applied
//! server-side under the one field manager with the cache as their controlling owner, so an
//! edited or deleted Deployment, Service or claim is put back on the next reconcile (the owned
//! objects are watched and reflected), with an Event on the cache saying what was put back and
//! why ([`restored`]); the status ([`status`]) written from what the apply returned, and an
//! Event when readiness changes. Deleting a cache leaves its objects to the garbage collector.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::desired::{self, Desired};
use super::restored::{self, restored};
use super::status::{self, Observed};
use crate::api::{ArtifactCache, ArtifactCacheStatus, FIELD_MANAGER};
use crate::cluster::ClusterView;
use crate::cluster::events::{EventReporter, Notice};
use crate::cluster::reflected::{Change, Reflected};
use crate::telemetry::error_chain;

/// The labels every owned object carries; the owned watches select by them.
pub const OWNED: &str = "app.kubernetes.io/name=artifact-cache,app.kubernetes.io/managed-by=ocifit";
/// How soon a cache that is not Ready yet is looked at again, besides its objects' changes.
const NOT_READY_RECHECK: Duration = Duration::from_secs(30);
/// The longest wait before retrying a reconcile that failed against the apiserver.
const RETRY: Duration = Duration::from_secs(10);

/// A reconcile failed against the apiserver (what the cache's objects say is status, not this).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the ArtifactCache's objects cannot be made")]
    Desired(#[from] desired::DesiredError),
    #[error("failed to apply {what} of ArtifactCache {namespace}/{name}")]
    Apply {
        what: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The kinds a cache owns, as their label-selected watches reflect them: what the controller is
/// about to put back, and its triggers.
#[derive(Clone)]
pub struct Owned {
    pub deployments: Reflected<Deployment>,
    pub services: Reflected<Service>,
    pub claims: Reflected<PersistentVolumeClaim>,
}

struct Context {
    cluster: ClusterView,
    reporter: EventReporter,
    owned: Owned,
}

/// The controller over `caches`; the future runs until `shutdown` resolves and in-flight
/// reconciles finish.
pub fn controller(
    cluster: ClusterView,
    reporter: EventReporter,
    caches: &Reflected<ArtifactCache>,
    owned: Owned,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> BoxFuture<'static, ()> {
    let gained = cluster.leadership.gained();
    Controller::for_shared_stream(spec_changes(caches), caches.store())
        .with_config(Config::default().concurrency(4))
        .owns_shared_stream(changed(&owned.deployments))
        .owns_shared_stream(changed(&owned.services))
        .owns_shared_stream(changed(&owned.claims))
        .reconcile_all_on(gained)
        .graceful_shutdown_on(shutdown)
        .run(
            reconcile,
            error_policy,
            Arc::new(Context {
                cluster,
                reporter,
                owned,
            }),
        )
        .for_each(|result| {
            if let Err(err) = result {
                tracing::debug!(error = %error_chain(&err), "artifact cache controller event");
            }
            std::future::ready(())
        })
        .boxed()
}

/// Caches first seen or whose spec changed: our own status writes reconcile nothing.
fn spec_changes(
    caches: &Reflected<ArtifactCache>,
) -> impl futures_util::Stream<Item = Arc<ArtifactCache>> + Send + 'static {
    let mut generations: HashMap<(String, String), Option<i64>> = HashMap::new();
    caches.subscribe().filter_map(move |change| {
        let changed = match change {
            Change::Applied(cache) => {
                let key = (cache.namespace().unwrap_or_default(), cache.name_any());
                let generation = cache.metadata.generation;
                (generations.insert(key, generation) != Some(generation)).then_some(cache)
            }
            Change::Deleted(cache) => {
                generations.remove(&(cache.namespace().unwrap_or_default(), cache.name_any()));
                None
            }
            Change::Synced => None,
        };
        std::future::ready(changed)
    })
}

/// Every owned object applied or deleted, for the controller to reconcile its owner.
fn changed<K>(owned: &Reflected<K>) -> impl futures_util::Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    owned.subscribe().filter_map(|change| {
        std::future::ready(match change {
            Change::Applied(object) | Change::Deleted(object) => Some(object),
            Change::Synced => None,
        })
    })
}

fn error_policy(cache: Arc<ArtifactCache>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(
        cache = %cache.name_any(),
        namespace = %cache.namespace().unwrap_or_default(),
        error = %error_chain(error),
        "artifact cache reconcile failed"
    );
    Action::requeue(RETRY)
}

async fn reconcile(cache: Arc<ArtifactCache>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.cluster.leadership.is_leader() || cache.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = cache.namespace().unwrap_or_default();
    let name = cache.name_any();
    let now = Time(Timestamp::now());
    let computed = match desired::desired(&cache)? {
        Some(desired) => {
            let Desired {
                deployment,
                service,
                claim,
            } = desired;
            let claims = &ctx.owned.claims;
            if let Some(claim) = claim {
                let what = "its PersistentVolumeClaim";
                apply(&ctx, &cache, what, &claim, claims).await?;
            }
            let service = apply(&ctx, &cache, "its Service", &service, &ctx.owned.services).await?;
            let deployments = &ctx.owned.deployments;
            let deployment =
                apply(&ctx, &cache, "its Deployment", &deployment, deployments).await?;
            let observed = Observed {
                deployment: &deployment,
                service: &service,
            };
            status::status(&cache, Some(observed), &now)
        }
        None => status::status(&cache, None, &now),
    };
    let ready = computed.conditions.iter().any(|c| c.status == "True");
    if cache.status.as_ref() != Some(&computed) && ctx.cluster.leadership.is_leader() {
        write_status(&ctx, &namespace, &name, &computed).await?;
        if let Some(change) = status::change(cache.status.as_ref(), &computed) {
            ctx.reporter
                .publish(Notice {
                    on: cache.object_ref(&()),
                    warning: change.warning,
                    reason: change.reason.as_str(),
                    action: "Reconcile",
                    note: change.note,
                })
                .await;
        }
    }
    Ok(if ready {
        Action::await_change()
    } else {
        Action::requeue(NOT_READY_RECHECK)
    })
}

/// Server-side apply of one owned object, forced: whatever someone changed in the fields we own
/// goes back; fields others added and we do not set stay theirs. When that put back what
/// someone else changed or deleted (against what `owned` last saw), an Event on the cache says so.
async fn apply<K>(
    ctx: &Context,
    cache: &ArtifactCache,
    what: &'static str,
    object: &K,
    owned: &Reflected<K>,
) -> Result<K, Error>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let namespace = cache.namespace().unwrap_or_default();
    let name = object.name_any();
    let before = owned
        .store()
        .get(&ObjectRef::<K>::new(&name).within(&namespace));
    // k8s-openapi's objects serialize their apiVersion and kind, as an apply body needs.
    let after = Api::<K>::namespaced(ctx.cluster.client.clone(), &namespace)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .map_err(|source| Error::Apply {
            what,
            namespace: namespace.clone(),
            name: cache.name_any(),
            source,
        })?;
    let applied_before = owned.synced()
        && cache
            .status
            .as_ref()
            .is_some_and(|s| s.observed_generation == cache.metadata.generation);
    if let Some(put_back) = restored(what, &name, before.as_deref(), &after, applied_before) {
        let notice = Notice {
            on: cache.object_ref(&()),
            warning: true,
            reason: restored::REASON,
            action: put_back.action,
            note: put_back.note,
        };
        ctx.reporter
            .publish_related(notice, after.object_ref(&()))
            .await;
    }
    Ok(after)
}

async fn write_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &ArtifactCacheStatus,
) -> Result<(), Error> {
    let body = serde_json::json!({
        "apiVersion": ArtifactCache::api_version(&()),
        "kind": ArtifactCache::kind(&()),
        "status": status,
    });
    Api::<ArtifactCache>::namespaced(ctx.cluster.client.clone(), namespace)
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(|source| Error::Apply {
            what: "its status",
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    tracing::info!(cache = %name, %namespace, endpoint = ?status.endpoint, "artifact cache status written");
    Ok(())
}
