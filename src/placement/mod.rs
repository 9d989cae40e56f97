//! Platform placement: selected pods land only on nodes where every one of their containers can
//! run. Laid out as every feature is: `route` is `/placement` (a selected pod gets the scheduling
//! gate and the tracking label, nothing else); `planner` decides, pure (selection, the gate, the
//! platforms every container shares, the release of a gated pod, the audit's verdicts); the
//! `controller` (leader) inspects the images of gated pods through the registry room and releases
//! them, keeps policies' status, node taints, exec format errors and the audit; `status` counts a
//! policy's pods; `way_out` and `running_audit` are the command line's. [`run`] starts it all,
//! with the namespaces' labels (one not watched yet is read by name). Imports no other feature.

mod controller;
mod planner;
mod route;
mod running_audit;
mod status;
mod way_out;
pub use planner::{ContainerImage, PodView, PolicySet, PullSecrets, UsablePolicies, intersect};
pub use route::{GatePods, PATH};

pub use controller::REASON as EXEC_FORMAT_ERROR_REASON;
pub use planner::Finding;
pub use running_audit::{AuditError, AuditRegistry, AuditReport, audit_cluster};
pub use way_out::{GATE, WayOutError, untaint_all};

#[cfg(test)]
mod fixtures;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::ListParams;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use crate::admission::Route;
use crate::api::{PlacementPolicy, REPORTING_CONTROLLER};
use crate::cluster::UNTRUSTED_LIST_PAGE;
use crate::cluster::{Change, Reflected, reflect};
use crate::cluster::{ClusterView, ReadAgain};
use crate::cluster::{EventReporter, queue};
use crate::process::{Feature, Readiness, Shutdown, Tasks, until};
use crate::registry::{DockerConfig, Inspector, InspectorOptions};
use crate::telemetry::Metrics;

/// What placement needs from the rest of the process.
pub struct PlacementDeps {
    pub cluster: ClusterView,
    /// Metrics to count into.
    pub metrics: Arc<Metrics>,
    /// This replica's identity (pod name), on its Events.
    pub identity: String,
    /// ocifit's own namespace (its pods are never gated).
    pub own_namespace: String,
    /// How images are inspected (registry client options, caches, limits).
    pub inspector: InspectorOptions,
    /// ocifit's own registry credentials, tried after a pod's pull Secrets.
    pub own_credentials: DockerConfig,
    /// Whether the `/placement` route is served.
    pub admission: bool,
    /// How often the controller audits running pods; `None`: never.
    pub audit_interval: Option<Duration>,
    /// Resolves once shutdown begins.
    pub shutdown: Shutdown,
}

/// Starts placement over the cluster view: the policy and labelled-pod watches, the policy feed
/// (compiling policies once per change), the controller, node tainting, the status keeper, and
/// with the route the namespace watch. It serves once its stores and compiled policies are in.
pub fn run(parts: PlacementDeps) -> Feature<Route> {
    let PlacementDeps {
        cluster,
        metrics,
        identity,
        own_namespace,
        inspector,
        own_credentials,
        admission,
        audit_interval,
        shutdown,
    } = parts;
    let client = cluster.client.clone();
    let (policies, policy_watch, pods, pod_watch) = watches(&client);
    let usable = UsablePolicies::default();
    let releases = Arc::new(controller::Tally::default());
    let exec_errors = Arc::new(controller::Tally::default());
    let misplaced = Arc::new(controller::Tally::default());
    let mut tasks: Tasks = vec![
        (
            "placement policy watch",
            until(shutdown.clone(), policy_watch),
        ),
        (
            "placement policy feed",
            until(shutdown.clone(), feed(policies.clone(), usable.clone())),
        ),
        ("placement pod watch", until(shutdown.clone(), pod_watch)),
        (
            "placement node taints",
            until(
                shutdown.clone(),
                controller::keep_node_taints(cluster.clone(), usable.clone()),
            ),
        ),
        (
            "placement status",
            until(
                shutdown.clone(),
                controller::keep_status(controller::StatusKeeper {
                    cluster: cluster.clone(),
                    policies: usable.clone(),
                    pods: pods.clone(),
                    releases: Arc::clone(&releases),
                    exec_errors: Arc::clone(&exec_errors),
                    misplaced: Arc::clone(&misplaced),
                    metrics: Arc::clone(&metrics),
                }),
            ),
        ),
    ];
    let mut gate = None;
    let route = admission.then(|| {
        let (route, store, namespace_watch) = gate_route(&client, &usable, &own_namespace);
        tasks.push(("namespace watch", until(shutdown.clone(), namespace_watch)));
        gate = Some(store);
        route
    });
    let (slots, wakes) = controller::namespace_slots();
    // Every notice is published (no window): each is about one pod, and repeats fold into series.
    let (notices, publisher) = queue(
        EventReporter::new(client, REPORTING_CONTROLLER, identity, Arc::clone(&metrics)),
        Duration::ZERO,
    );
    tasks.push(("placement events", until(shutdown.clone(), publisher)));
    let inspector = Inspector::new(inspector);
    let context = controller::Context {
        // With the route, the namespaces it reads are in memory already.
        namespaces: gate.as_ref().map(Reflected::store),
        cluster: cluster.clone(),
        policies: usable.clone(),
        inspector,
        own_credentials,
        notices,
        metrics,
        own_namespace,
        retries: Default::default(),
        slots,
        releases,
    };
    let reporter = controller::ExecErrorReporter::new(&context, exec_errors);
    let watched = until(shutdown.clone(), reporter.watch_released());
    tasks.push(("placement exec format errors", watched));
    if let Some(interval) = audit_interval {
        let auditor = controller::Auditor::new(&context, misplaced, interval);
        tasks.push(("placement audit", until(shutdown.clone(), auditor.run())));
    }
    tasks.push((
        "placement controller",
        controller::controller(context, &pods, wakes, shutdown.wait()),
    ));
    Feature {
        tasks,
        routes: route.into_iter().collect(),
        readiness: readiness(policies, pods, usable, gate),
    }
}

/// The `/placement` route over the usable policies, with the namespace watch it reads and its
/// store.
fn gate_route(
    client: &kube::Client,
    usable: &UsablePolicies,
    own_namespace: &str,
) -> (
    Route,
    Reflected<PartialObjectMeta<Namespace>>,
    BoxFuture<'static, ()>,
) {
    let (store, namespace_watch) = namespaces(client);
    let route = Route::new(
        route::PATH,
        GatePods {
            policies: usable.clone(),
            namespaces: store.store(),
            read_namespace: read_namespace(client),
            own_namespace: own_namespace.to_owned(),
        },
    )
    // An ungated pod is always safe (failurePolicy Ignore): admitted unchanged when busy.
    .when_undecided(crate::admission::Undecided::AdmitUnchanged);
    (route, store, namespace_watch)
}

/// Ready once both stores hold a first list, the policies compiled from it are stored, and
/// the gate's namespaces (with the route) are listed.
fn readiness(
    policies: Reflected<PlacementPolicy>,
    pods: Reflected<Pod>,
    usable: UsablePolicies,
    gate: Option<Reflected<PartialObjectMeta<Namespace>>>,
) -> Readiness {
    let synced = (policies.clone(), pods.clone());
    Readiness::new(
        async move {
            synced.0.wait_synced().await;
            synced.1.wait_synced().await;
        },
        move || {
            policies.synced()
                && pods.synced()
                && usable.stored()
                && gate.as_ref().is_none_or(Reflected::synced)
        },
    )
}

/// The policy watch and the labelled-pod watch, each with its store.
fn watches(
    client: &kube::Client,
) -> (
    Reflected<PlacementPolicy>,
    BoxFuture<'static, ()>,
    Reflected<Pod>,
    BoxFuture<'static, ()>,
) {
    let (policies, policy_watch) = reflect(
        watcher(
            Api::<PlacementPolicy>::all(client.clone()),
            watcher::Config::default(),
        )
        .backoff(crate::process::watch_backoff())
        .modify(planner::trim_policy),
        "placementpolicies",
    );
    // Only the pods carrying the tracking label and not yet released (the store never holds
    // the rest of the cluster's), and of those only what placement reads: anyone can set the label.
    let (pods, pod_watch) = reflect(
        watcher(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default()
                .labels(&planner::held_selector().to_string())
                .page_size(UNTRUSTED_LIST_PAGE),
        )
        .backoff(crate::process::watch_backoff())
        .modify(planner::trim_held),
        "placement pods",
    );
    (policies, policy_watch, pods, pod_watch)
}

/// The namespace watch the gate's namespace selectors read, with its store (labels only).
fn namespaces(
    client: &kube::Client,
) -> (
    Reflected<PartialObjectMeta<Namespace>>,
    BoxFuture<'static, ()>,
) {
    reflect(
        watcher(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            watcher::Config::default(),
        )
        .backoff(crate::process::watch_backoff())
        .modify(|namespace| {
            namespace.metadata.managed_fields = None;
            namespace.metadata.annotations = None;
        }),
        "namespaces",
    )
}

/// The label the apiserver puts on every namespace, naming it.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The labels every namespace is sure to carry: its name label.
fn name_only(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_LABEL.to_owned(), name.to_owned())])
}

/// The labels of namespace `name`, read from the apiserver; a namespace not found has only its
/// name label, as admission assumes.
async fn read_labels(client: &Client, name: &str) -> Result<BTreeMap<String, String>, kube::Error> {
    Ok(find_labels(client, name)
        .await?
        .unwrap_or_else(|| name_only(name)))
}

/// The labels of namespace `name` if it exists (one without labels has its name label).
async fn find_labels(
    client: &Client,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed = namespaces
        .list_metadata(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .next()
        .map(|namespace| namespace.metadata.labels.unwrap_or_else(|| name_only(name))))
}

/// Reads a namespace's labels for admission when the store does not hold it: `None` when it
/// cannot be read in time. Called on the blocking pool (the gate plans there only then).
type ReadNamespace = ReadAgain<str, BTreeMap<String, String>>;

/// The gate's read of a namespace from the apiserver, within admission's budget of reads (a
/// namespace not found is not read again for a while); `None` outside a Tokio runtime.
fn read_namespace(client: &Client) -> Option<ReadNamespace> {
    ReadAgain::from_apiserver(client, |client, name: &str| {
        let name = name.to_owned();
        async move { find_labels(&client, &name).await }
    })
}

/// Keeps `usable` equal to the store's policies compiled, after each change of the store.
async fn feed(policies: Reflected<PlacementPolicy>, usable: UsablePolicies) {
    let mut changes = std::pin::pin!(policies.subscribe().ready_chunks(256));
    while let Some(batch) = changes.next().await {
        if batch.iter().all(|change| matches!(change, Change::Synced)) && !policies.synced() {
            continue;
        }
        usable.store(PolicySet::compile(policies.store().state()));
    }
}
