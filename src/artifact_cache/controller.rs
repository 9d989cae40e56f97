//! The ArtifactCache controller (leader only): each cache's desired objects ([`desired`]) applied
//! server-side with the cache as controlling owner, so an edited or deleted Deployment, Service or
//! claim is put back on the next reconcile with an Event saying why (`owned::restored`); the status
//! ([`status`]) written from what the apply returned, with an Event when readiness changes.
//! Nothing is written over an object the cache does not already own, nor for an image off the
//! allow-list: the status says which and why. A cache without `htpasswdSecretRef` gets generated
//! credentials ([`secret`]) once. Deleting a cache leaves its objects to the garbage collector.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Config};
use kube::{Api, Resource, ResourceExt};

use super::desired::{self, Desired};
use super::owned::Trimmed;
use super::secret::{self, Generated};
use super::status::{self, Observed};
use crate::api::{ArtifactCache, ArtifactCacheStatus, CacheReason, FIELD_MANAGER};
use crate::cluster::ClusterView;
use crate::cluster::{Change, Reflected, pod_selector};
use crate::cluster::{EventReporter, Notice};
use tracing::Instrument;

use crate::telemetry::{self, Metrics, error_chain};

mod objects;

pub(super) use objects::Error;

/// The labels every owned object carries; the owned watches select by them.
pub(super) const OWNED: &str =
    "app.kubernetes.io/name=artifact-cache,app.kubernetes.io/managed-by=ocifit";
/// How soon a cache that is not Ready yet is looked at again, besides its objects' changes.
const NOT_READY_RECHECK: Duration = Duration::from_secs(30);
/// The longest wait before retrying a reconcile that failed against the apiserver.
const RETRY: Duration = Duration::from_secs(10);

/// The kinds a cache owns, as their watches reflect them (trimmed, only what ocifit made for a
/// cache in the store: [`super::owned`]): what the controller is about to put back, and its
/// triggers.
#[derive(Clone)]
pub(super) struct Owned {
    pub deployments: Reflected<Trimmed<Deployment>>,
    pub services: Reflected<Trimmed<Service>>,
    pub claims: Reflected<Trimmed<PersistentVolumeClaim>>,
}

/// What the controller is told at start.
#[derive(Clone, Debug)]
pub struct CacheControllerSettings {
    /// ocifit's own namespace (each cache's NetworkPolicy admits it).
    pub own_namespace: String,
    /// The registry images a cache may deploy (`--artifact-cache-images`).
    pub images: Vec<String>,
}

struct Context {
    cluster: ClusterView,
    reporter: EventReporter,
    owned: Owned,
    applied: objects::LastApplied,
    settings: CacheControllerSettings,
    metrics: Arc<Metrics>,
}

/// The controller over `caches`; the future runs until `shutdown` resolves and in-flight
/// reconciles finish.
pub(super) fn controller(
    cluster: ClusterView,
    reporter: EventReporter,
    caches: &Reflected<ArtifactCache>,
    owned: Owned,
    settings: CacheControllerSettings,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> BoxFuture<'static, ()> {
    let gained = cluster.leadership.gained();
    Controller::for_shared_stream(caches.spec_changes(), caches.store())
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
                applied: objects::last_applied(),
                settings,
                metrics,
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

/// Reconciles one cache, counted with its duration.
async fn reconcile(cache: Arc<ArtifactCache>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.cluster.leadership.is_leader() {
        ctx.metrics.reconciled(
            telemetry::Controller::ArtifactCache,
            telemetry::ReconcileResult::NotLeader,
            0.0,
        );
        return Ok(Action::await_change());
    }
    let started = std::time::Instant::now();
    let result = reconcile_cache(cache, Arc::clone(&ctx))
        .instrument(telemetry::reconcile_span(
            telemetry::Controller::ArtifactCache,
        ))
        .await;
    let seconds = started.elapsed().as_secs_f64();
    ctx.metrics.reconciled(
        telemetry::Controller::ArtifactCache,
        telemetry::ReconcileResult::of(&result),
        seconds,
    );
    result
}

async fn reconcile_cache(cache: Arc<ArtifactCache>, ctx: Arc<Context>) -> Result<Action, Error> {
    if cache.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = cache.namespace().unwrap_or_default();
    let name = cache.name_any();
    let now = Time(Timestamp::now());
    let computed = deploy(&ctx, &cache, &now).await?;
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
    ctx.metrics
        .reconcile_succeeded(telemetry::Controller::ArtifactCache);
    Ok(if ready {
        Action::await_change()
    } else {
        Action::requeue(NOT_READY_RECHECK)
    })
}

/// The status after doing what `cache` asks: nothing to deploy, a refusal (image, conflict), or
/// its objects applied.
async fn deploy(
    ctx: &Context,
    cache: &ArtifactCache,
    now: &Time,
) -> Result<ArtifactCacheStatus, Error> {
    let recorded = cache
        .status
        .as_ref()
        .and_then(|s| s.credentials_secret.clone());
    if !cache.spec.deploy {
        return Ok(status::status(cache, None, None, now));
    }
    let image = desired::image(cache);
    if !desired::image_allowed(&image, &ctx.settings.images) {
        let message = format!(
            "image {image} is not one ocifit deploys (--artifact-cache-images: {}); nothing is deployed",
            ctx.settings.images.join(", ")
        );
        let reason = CacheReason::ImageNotAllowed;
        return Ok(status::refused(cache, reason, message, recorded, now));
    }
    let credentials = credentials(ctx, cache, recorded).await?;
    let settings = desired::CacheEnvironment {
        own_namespace: &ctx.settings.own_namespace,
        credentials: credentials.as_deref(),
    };
    let Some(desired) = desired::desired(cache, settings)? else {
        return Ok(status::status(cache, None, credentials, now));
    };
    if let Some(conflict) = objects::conflict(&ctx.cluster.client, cache, &desired).await? {
        let message = format!(
            "{conflict} exists and is not owned by this ArtifactCache; ocifit writes nothing over it: delete or rename it, or name the cache differently"
        );
        let reason = CacheReason::Conflict;
        return Ok(status::refused(cache, reason, message, credentials, now));
    }
    let (deployment, service) = apply_all(ctx, cache, desired).await?;
    let pods = if status::has_ready_replica(&deployment) {
        Vec::new()
    } else {
        registry_pods(ctx, cache, &deployment).await?
    };
    let observed = Observed {
        deployment: &deployment,
        service: &service,
        pods: &pods,
    };
    Ok(status::status(cache, Some(observed), credentials, now))
}

/// Applies the cache's objects, the Deployment last as before; the Deployment and the Service
/// as applied.
async fn apply_all(
    ctx: &Context,
    cache: &ArtifactCache,
    desired: Desired,
) -> Result<(Deployment, Service), Error> {
    let Desired {
        deployment,
        service,
        network_policy,
        claim,
        disruption_budget,
    } = desired;
    if let Some(claim) = claim {
        let what = "its PersistentVolumeClaim";
        objects::apply(
            &ctx.cluster.client,
            &ctx.reporter,
            cache,
            what,
            &claim,
            (Some(&ctx.owned.claims), &ctx.applied),
        )
        .await?;
    }
    let services = Some(&ctx.owned.services);
    let service = objects::apply(
        &ctx.cluster.client,
        &ctx.reporter,
        cache,
        "its Service",
        &service,
        (services, &ctx.applied),
    )
    .await?;
    let policy = "its NetworkPolicy";
    objects::apply(
        &ctx.cluster.client,
        &ctx.reporter,
        cache,
        policy,
        &network_policy,
        (None, &ctx.applied),
    )
    .await?;
    if let Some(budget) = disruption_budget {
        let what = "its PodDisruptionBudget";
        objects::apply(
            &ctx.cluster.client,
            &ctx.reporter,
            cache,
            what,
            &budget,
            (None, &ctx.applied),
        )
        .await?;
    }
    let deployments = Some(&ctx.owned.deployments);
    let deployment = objects::apply(
        &ctx.cluster.client,
        &ctx.reporter,
        cache,
        "its Deployment",
        &deployment,
        (deployments, &ctx.applied),
    )
    .await?;
    Ok((deployment, service))
}

/// The Secret of generated credentials the registry serves with: none when the cache names its
/// own htpasswd Secret, else the one recorded in its status, else a new one, recorded at once.
async fn credentials(
    ctx: &Context,
    cache: &ArtifactCache,
    recorded: Option<String>,
) -> Result<Option<String>, Error> {
    Ok(match (&cache.spec.htpasswd_secret_ref, recorded) {
        (Some(_), _) => None,
        (None, Some(name)) => Some(name),
        (None, None) => {
            let created = create_credentials(ctx, cache).await?;
            // Recorded at once, so a reconcile that fails further on generates no second one.
            let mut status = cache.status.clone().unwrap_or_default();
            status.credentials_secret = Some(created.clone());
            let namespace = cache.namespace().unwrap_or_default();
            write_status(ctx, &namespace, &cache.name_any(), &status).await?;
            Some(created)
        }
    })
}

/// The registry's pods, by the Deployment's selector: what they wait for tells why the registry
/// does not start (an image that cannot be pulled, a Secret not there, a crash).
async fn registry_pods(
    ctx: &Context,
    cache: &ArtifactCache,
    deployment: &Deployment,
) -> Result<Vec<Pod>, Error> {
    let namespace = cache.namespace().unwrap_or_default();
    let Some(selector) = pod_selector(deployment) else {
        return Ok(Vec::new());
    };
    let pods = Api::<Pod>::namespaced(ctx.cluster.client.clone(), &namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Read {
            what: "its registry's pods",
            namespace: namespace.clone(),
            name: cache.name_any(),
            source,
        })?;
    Ok(pods.items)
}

/// Creates the cache's Secret of generated credentials under a name the apiserver makes up, so
/// it cannot be anyone's existing Secret; returns that name (recorded in the status).
async fn create_credentials(ctx: &Context, cache: &ArtifactCache) -> Result<String, Error> {
    let namespace = cache.namespace().unwrap_or_default();
    let generated = Generated::new()?;
    let secret = secret::secret(cache, &generated)?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let created = Api::<Secret>::namespaced(ctx.cluster.client.clone(), &namespace)
        .create(&params, &secret)
        .await
        .map_err(|source| Error::Apply {
            what: "its credentials Secret",
            namespace: namespace.clone(),
            name: cache.name_any(),
            source,
        })?;
    let name = created.name_any();
    tracing::info!(cache = %cache.name_any(), %namespace, secret = %name, "artifact cache credentials generated");
    Ok(name)
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
