//! The workflow artifact cache: the ArtifactCache controller (each cache's registry deployed and
//! kept, its status), and the step routes on the admission host (the oras-operator's annotations
//! on Pods and Jobs turned into a pod mutation that runs `crate::step_helper`, or a denial).
//! Imports no other feature.
//!
//! Pure: `planner`, `desired` (a cache's objects), `status`, `held` (a step held while its cache
//! starts). Adapters: `controller`, `route`, `release` (held steps), `transfers` (moves counted).

mod controller;
mod desired;
mod held;
mod owned;
mod planner;
mod release;
mod route;
mod secret;
mod status;
mod transfers;
pub use desired::{CacheEnvironment, Desired, HTTP_SECRET_KEY, desired};
pub use planner::{Helper, StepRegistries};
pub use route::{JOBS, PODS, StepJobs, StepPods, Steps, read_cache_again};
pub use secret::{Generated, secret};
pub use status::{Observed, status};

pub use controller::CacheControllerSettings;
pub use desired::object_name;
pub use held::{GATE, HoldRules};
pub use planner::{PREPARE, PUSH, Source as StepSource, cache_of, step_settings, wiring_of};
pub use secret::PUSH_USER_KEY;

use std::sync::Arc;

use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::admission::Route;
use crate::api::{ArtifactCache, REPORTING_CONTROLLER};
use crate::cluster::ClusterView;
use crate::cluster::EventReporter;
use crate::cluster::{Reflected, reflect};
use crate::process::{Feature, Readiness, Shutdown, until};
use crate::telemetry::Metrics;

/// What the artifact cache needs from the rest of the process.
pub struct ArtifactCacheDeps {
    pub cluster: ClusterView,
    /// Metrics (the controller's Events are counted there).
    pub metrics: Arc<Metrics>,
    /// This replica's identity, on its Events.
    pub identity: String,
    /// The helper containers' image (ocifit's own); `None` refuses steps that move artifacts.
    pub helper: Option<Helper>,
    /// The registries a step's `registry` annotation may name.
    pub registries: StepRegistries,
    pub settings: controller::CacheControllerSettings,
    /// How long a step is held while its cache is not Ready, and what follows.
    pub hold: HoldRules,
    /// Resolves once shutdown begins.
    pub shutdown: Shutdown,
}

/// Starts the artifact cache over the cluster view: every replica watches the caches (admission
/// reads them); the leader reconciles them. Its routes are the step routes (Pods, Jobs); it can
/// serve once the cache store holds a first list.
pub fn run(parts: ArtifactCacheDeps) -> Feature<Route> {
    let ArtifactCacheDeps {
        cluster,
        metrics,
        identity,
        helper,
        registries,
        settings,
        hold,
        shutdown,
    } = parts;
    let (caches, watch) = reflect(
        watcher(
            Api::<ArtifactCache>::all(cluster.client.clone()),
            // Any namespace admin writes caches: a page of the largest is held whole while read.
            watcher::Config::default().page_size(crate::cluster::UNTRUSTED_LIST_PAGE),
        )
        .backoff(crate::process::watch_backoff())
        .modify(trim),
        "artifactcaches",
    );
    let reporter = EventReporter::new(
        cluster.client.clone(),
        REPORTING_CONTROLLER,
        identity,
        Arc::clone(&metrics),
    );
    let counted = until(
        shutdown.clone(),
        count_readiness(caches.clone(), Arc::clone(&metrics)),
    );
    // Without a helper image no step moves anything, so there is nothing to count.
    let transfers = until(
        shutdown.clone(),
        match helper.as_ref().map(|helper| helper.image.clone()) {
            Some(image) => transfers::count(
                cluster.client.clone(),
                cluster.leadership.clone(),
                Arc::clone(&metrics),
                caches.store(),
                image,
            ),
            None => Box::pin(futures_util::future::pending()),
        },
    );
    let steps = Steps {
        caches: caches.store(),
        helper,
        read_again: route::read_cache_again(&cluster.client),
        registries,
    };
    let routes = vec![
        Route::new(route::PODS, StepPods(steps.clone())),
        Route::new(route::JOBS, StepJobs(steps)),
    ];
    let (deployments, deployments_watch) = owned(&cluster, &caches, "artifact cache deployments");
    let (services, services_watch) = owned(&cluster, &caches, "artifact cache services");
    let (claims, claims_watch) = owned(&cluster, &caches, "artifact cache claims");
    let owned = controller::Owned {
        deployments,
        services,
        claims,
    };
    let released = release::run(cluster.clone(), &caches, reporter.clone(), hold, &shutdown);
    let controller = controller::controller(
        cluster,
        reporter,
        &caches,
        owned,
        settings,
        metrics,
        shutdown.clone().wait(),
    );
    let synced = caches.clone();
    let mut tasks = vec![
        ("artifact cache watch", until(shutdown.clone(), watch)),
        (
            "artifact cache deployments watch",
            until(shutdown.clone(), deployments_watch),
        ),
        (
            "artifact cache services watch",
            until(shutdown.clone(), services_watch),
        ),
        ("artifact cache claims watch", until(shutdown, claims_watch)),
        ("artifact cache controller", controller),
        ("artifact cache readiness", counted),
        ("artifact cache step transfers", transfers),
    ];
    tasks.extend(released);
    Feature {
        tasks,
        routes,
        readiness: Readiness::new(async move { synced.wait_synced().await }, move || {
            caches.synced()
        }),
    }
}

/// Keeps of a cache what ocifit reads: its identity, generation, spec and status (its spec and
/// strings bounded by the CRD's schema), not the labels, annotations and managed fields anyone
/// who edits it can make megabytes of.
pub fn trim(cache: &mut ArtifactCache) {
    let metadata = std::mem::take(&mut cache.metadata);
    cache.metadata = kube::core::ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        generation: metadata.generation,
        creation_timestamp: metadata.creation_timestamp,
        deletion_timestamp: metadata.deletion_timestamp,
        ..kube::core::ObjectMeta::default()
    };
}

/// Keeps the caches-by-readiness gauges: recounted from the store after every change (each
/// replica reflects the same caches, so each reports them); and the step metrics of the caches
/// there only, so a deleted cache's series go.
fn count_readiness(
    caches: Reflected<ArtifactCache>,
    metrics: Arc<Metrics>,
) -> futures_util::future::BoxFuture<'static, ()> {
    use futures_util::{FutureExt, StreamExt};
    caches
        .subscribe()
        .ready_chunks(256)
        .for_each(move |_| {
            if caches.synced() {
                let state = caches.store().state();
                let (ready, not_ready) = status::count_ready(state.iter().map(AsRef::as_ref));
                metrics.set_artifact_caches(ready, not_ready);
                let live = state.iter().filter_map(|cache| transfers::label(cache));
                metrics.keep_step_caches(&live.collect());
            }
            std::future::ready(())
        })
        .boxed()
}

/// One kind the caches own, watched by the owned objects' labels and reflected: only the objects
/// ocifit made for a cache in the store, trimmed ([`owned`]). The watch starts once the caches
/// are listed, so no object of a cache is taken for a stranger's for want of its cache.
fn owned<K>(
    cluster: &ClusterView,
    caches: &Reflected<ArtifactCache>,
    what: &'static str,
) -> (
    Reflected<owned::Trimmed<K>>,
    futures_util::future::BoxFuture<'static, ()>,
)
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    use futures_util::FutureExt;
    let config = watcher::Config::default()
        .labels(controller::OWNED)
        .page_size(crate::cluster::UNTRUSTED_LIST_PAGE);
    let (reflected, watch) = reflect(
        owned::made_only(
            watcher(Api::<K>::all(cluster.client.clone()), config)
                .backoff(crate::process::watch_backoff()),
            caches.store(),
        ),
        what,
    );
    let listed = caches.clone();
    let watch = async move {
        listed.wait_synced().await;
        watch.await;
    };
    (reflected, watch.boxed())
}

#[cfg(test)]
mod tests;
