//! Keeps the planner's [`Index`] fresh on every replica, from the change subscriptions of the
//! policy store and the cluster view's node and NodeFeature stores: no timer. Each change is
//! hashed for what the planner reads of it (a policy's spec and status, a node's labels, a
//! NodeFeature's features); only a real change rebuilds the index, so node heartbeats cost a hash
//! and no rebuild, and a burst of changes already queued costs one. Admission only loads the
//! current `Arc`. It owns when the index is rebuilt; what the index holds and decides belongs to
//! the planner.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use foldhash::fast::FixedState;
use futures_util::{FutureExt, StreamExt};
use kube::ResourceExt;
use tokio::sync::watch;

use super::planner::Index;
use crate::api::ImageSelectionPolicy;
use crate::cluster::ClusterNode;
use crate::cluster::ClusterView;
use crate::cluster::{Change, Reflected};
use crate::engine::{NodeFeature, features_by_node};
use crate::telemetry::Metrics;

/// The current index, shared by the feed, the request handlers and the release controller.
/// Empty until the first build.
#[derive(Clone, Debug)]
pub struct SharedIndex(Arc<ArcSwapOption<Index>>, Arc<watch::Sender<()>>);

impl Default for SharedIndex {
    fn default() -> Self {
        SharedIndex(Arc::default(), Arc::new(watch::channel(()).0))
    }
}

impl SharedIndex {
    /// Yields once after each replacement of the index (replacements in between fold into one).
    pub fn changes(&self) -> impl futures_util::Stream<Item = ()> + Send + 'static {
        futures_util::stream::unfold(self.1.subscribe(), |mut changed| async move {
            changed.changed().await.ok()?;
            Some(((), changed))
        })
    }

    /// The current index, if one was built.
    pub fn load(&self) -> Option<Arc<Index>> {
        self.0.load_full()
    }

    /// Replaces the index.
    pub fn store(&self, index: Index) {
        self.0.store(Some(Arc::new(index)));
        self.1.send_replace(());
    }

    /// Whether an index was built.
    pub fn is_built(&self) -> bool {
        self.0.load().is_some()
    }
}

/// One change, from whichever store.
enum Fed {
    Policy(Change<ImageSelectionPolicy>),
    Node(Change<ClusterNode>),
    Feature(Change<NodeFeature>),
}

/// What the planner reads of each object, hashed, by object key.
#[derive(Default)]
struct Digests(HashMap<String, u64>);

impl Digests {
    /// Records `hash` for `key`; whether it differs from before.
    fn applied(&mut self, key: String, hash: u64) -> bool {
        self.0.insert(key, hash) != Some(hash)
    }

    /// Forgets `key`; whether it was known.
    fn deleted(&mut self, key: &str) -> bool {
        self.0.remove(key).is_some()
    }

    /// Replaces every digest with `now`'s; whether anything differs.
    fn resynced(&mut self, now: HashMap<String, u64>) -> bool {
        let changed = now != self.0;
        self.0 = now;
        changed
    }
}

fn fingerprint(write: impl FnOnce(&mut foldhash::fast::FoldHasher)) -> u64 {
    let mut hasher = FixedState::default().build_hasher();
    write(&mut hasher);
    hasher.finish()
}

fn policy_digest(policy: &ImageSelectionPolicy) -> u64 {
    fingerprint(|h| {
        serde_json::to_string(&policy.spec)
            .unwrap_or_default()
            .hash(h);
        serde_json::to_string(&policy.status)
            .unwrap_or_default()
            .hash(h);
    })
}

fn node_digest(node: &ClusterNode) -> u64 {
    fingerprint(|h| node.labels().for_each(|label| label.hash(h)))
}

fn feature_digest(object: &NodeFeature) -> u64 {
    fingerprint(|h| {
        object.metadata.labels.hash(h);
        serde_json::to_string(&object.spec.features)
            .unwrap_or_default()
            .hash(h);
    })
}

fn feature_key(object: &NodeFeature) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

/// Rebuilds `index` from the stores whenever what it is built from changes, until every
/// subscription ends (never, while the watches run). The first index is built once the policy
/// and node stores hold a first list (NodeFeature objects may never come: NFD not installed).
pub(super) async fn feed(
    policies: Reflected<ImageSelectionPolicy>,
    cluster: ClusterView,
    index: SharedIndex,
    metrics: Arc<Metrics>,
) {
    let mut changes = futures_util::stream::select_all([
        policies.subscribe().map(Fed::Policy).boxed(),
        cluster.nodes.subscribe().map(Fed::Node).boxed(),
        cluster.node_features.subscribe().map(Fed::Feature).boxed(),
    ]);
    let mut digests = [Digests::default(), Digests::default(), Digests::default()];
    // Whether node labels or features changed since the last build: until then, a rebuild for
    // policies only takes the node groupings over from the current index.
    let mut nodes_changed = true;
    let mut dirty = false;
    while let Some(first) = changes.next().await {
        let mut next = Some(first);
        // Whatever is already queued joins this rebuild.
        while let Some(change) = next {
            let node_side = !matches!(change, Fed::Policy(_));
            if apply(&mut digests, &policies, &cluster, change) {
                dirty = true;
                nodes_changed |= node_side;
            }
            next = changes.next().now_or_never().flatten();
        }
        if (dirty || !index.is_built()) && policies.synced() && cluster.nodes.synced() {
            let earlier = index.load().filter(|_| !nodes_changed);
            rebuild(&policies, &cluster, &index, earlier.as_deref(), &metrics);
            (dirty, nodes_changed) = (false, false);
        }
    }
}

/// Applies one change to the digests; whether what the planner reads changed.
fn apply(
    digests: &mut [Digests; 3],
    policies: &Reflected<ImageSelectionPolicy>,
    cluster: &ClusterView,
    change: Fed,
) -> bool {
    let [policy_digests, node_digests, feature_digests] = digests;
    match change {
        Fed::Policy(Change::Applied(p)) => policy_digests.applied(p.name_any(), policy_digest(&p)),
        Fed::Policy(Change::Deleted(p)) => policy_digests.deleted(&p.name_any()),
        Fed::Policy(Change::Synced) => policy_digests.resynced(
            policies
                .store()
                .state()
                .iter()
                .map(|p| (p.name_any(), policy_digest(p)))
                .collect(),
        ),
        Fed::Node(Change::Applied(n)) => node_digests.applied(n.name_any(), node_digest(&n)),
        Fed::Node(Change::Deleted(n)) => node_digests.deleted(&n.name_any()),
        Fed::Node(Change::Synced) => node_digests.resynced(
            cluster
                .nodes
                .store()
                .state()
                .iter()
                .map(|n| (n.name_any(), node_digest(n)))
                .collect(),
        ),
        Fed::Feature(Change::Applied(f)) => {
            feature_digests.applied(feature_key(&f), feature_digest(&f))
        }
        Fed::Feature(Change::Deleted(f)) => feature_digests.deleted(&feature_key(&f)),
        Fed::Feature(Change::Synced) => feature_digests.resynced(
            cluster
                .node_features
                .store()
                .state()
                .iter()
                .map(|f| (feature_key(f), feature_digest(f)))
                .collect(),
        ),
    }
}

fn rebuild(
    policies: &Reflected<ImageSelectionPolicy>,
    cluster: &ClusterView,
    index: &SharedIndex,
    earlier: Option<&Index>,
    metrics: &Metrics,
) {
    let started = std::time::Instant::now();
    let policies = policies.store().state();
    let nodes = cluster.nodes.store().state();
    let node_features = cluster.node_features.store().state();
    metrics.set_store_sizes(policies.len(), nodes.len(), node_features.len());
    // Features are merged only when some policy's classes are drawn on them.
    let reads_features = policies.iter().any(|p| {
        p.status
            .as_ref()
            .and_then(|s| s.class_keys.as_ref())
            .is_some_and(|reads| !reads.features.is_empty())
    });
    let features = if reads_features {
        features_by_node(
            node_features.iter().map(|f| &**f),
            &cluster.settings.nfd_namespace,
        )
    } else {
        BTreeMap::new()
    };
    let (policy_count, node_count) = (policies.len(), nodes.len());
    index.store(Index::new(policies, nodes, &features, earlier));
    metrics.index_rebuilt();
    tracing::debug!(
        policies = policy_count,
        nodes = node_count,
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        "admission index rebuilt"
    );
}

#[cfg(test)]
mod tests;
