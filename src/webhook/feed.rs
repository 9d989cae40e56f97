//! Keeps the planner's [`Index`] fresh from the controller's in-memory stores, on every replica
//! (the stores are filled whether or not this replica leads). A task looks at the stores every
//! [`CHECK_INTERVAL`] and compares what the planner reads (policy spec and status, node labels,
//! NodeFeature specs), hashed once per object version; only a real change rebuilds the index,
//! so node heartbeats cost no rebuild and a burst of changes costs one.
//! Admission only loads the current `Arc`. It owns when the index is rebuilt; what the index
//! holds and decides belongs to the planner.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use futures_util::FutureExt;
use kube::ResourceExt;

use super::planner::Index;
use crate::controller::context::Stores;
use crate::controller::inventory::node_inputs;
use crate::telemetry::Metrics;

/// How often the stores are looked at: the longest a store change waits for the index.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// The current index, shared by the feed and the request handlers. Empty until the first build.
#[derive(Clone, Debug, Default)]
pub struct SharedIndex(Arc<ArcSwapOption<Index>>);

impl SharedIndex {
    /// The current index, if one was built.
    pub fn load(&self) -> Option<Arc<Index>> {
        self.0.load_full()
    }

    /// Replaces the index.
    pub fn store(&self, index: Index) {
        self.0.store(Some(Arc::new(index)));
    }

    /// Whether an index was built.
    pub fn is_built(&self) -> bool {
        self.0.load().is_some()
    }
}

/// Rebuilds `index` from `stores` whenever what it is built from changes, until dropped. Waits
/// for the policy and node stores to sync before the first build, so the first index is never
/// built from an empty cache.
pub async fn feed(
    stores: Stores,
    nfd_namespace: String,
    index: SharedIndex,
    metrics: Arc<Metrics>,
) {
    let mut policy_digests = Digests::default();
    let mut node_digests = Digests::default();
    let mut feature_digests = Digests::default();
    let mut built = None;
    let mut ticks = tokio::time::interval(CHECK_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if !synced(&stores) {
            continue;
        }
        let policies = stores.policies.state();
        let nodes = stores.nodes.state();
        let features = stores.node_features.state();
        metrics.set_store_sizes(policies.len(), nodes.len(), features.len());
        let now = (
            policy_digests.digest(&policies, |p, h| {
                p.name_any().hash(h);
                serde_json::to_string(&p.spec).unwrap_or_default().hash(h);
                serde_json::to_string(&p.status).unwrap_or_default().hash(h);
            }),
            node_digests.digest(&nodes, |n, h| (n.name_any(), &n.metadata.labels).hash(h)),
            feature_digests.digest(&features, |f, h| {
                (f.namespace(), f.name_any(), &f.metadata.labels).hash(h);
                serde_json::to_string(&f.spec).unwrap_or_default().hash(h);
            }),
        );
        if built == Some(now) {
            continue;
        }
        built = Some(now);
        let started = std::time::Instant::now();
        // Pods select nodes on any label: the index keeps them all.
        let inputs = node_inputs(&nodes, &features, &nfd_namespace, |_| true);
        index.store(Index::new(
            policies.iter().map(|p| &**p),
            inputs.iter().map(|(name, i)| (name.as_str(), i)),
        ));
        metrics.index_rebuilt();
        tracing::debug!(
            policies = policies.len(),
            nodes = nodes.len(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "webhook index rebuilt"
        );
    }
}

/// Whether the policy and node stores have listed once. NodeFeature objects may never come
/// (NFD not installed), so they do not hold the index back.
fn synced(stores: &Stores) -> bool {
    let ready = |wait: Option<Result<(), _>>| matches!(wait, Some(Ok(())));
    ready(stores.policies.wait_until_ready().now_or_never())
        && ready(stores.nodes.wait_until_ready().now_or_never())
}

/// What the planner reads of each object of a store, hashed once per object: the store replaces
/// an object's `Arc` when the object changes, so an `Arc` seen before (held here, so its address
/// cannot be reused) needs no rehash. A pass costs a map lookup per object; only new or changed
/// objects (a heartbeat included) are read again.
struct Digests<K>(HashMap<usize, (Arc<K>, u64)>);

impl<K> Default for Digests<K> {
    fn default() -> Self {
        Digests(HashMap::new())
    }
}

impl<K> Digests<K> {
    /// The digest of `objects` (independent of their order), `read` hashing what counts.
    fn digest(&mut self, objects: &[Arc<K>], read: impl Fn(&K, &mut DefaultHasher)) -> u64 {
        let mut next = HashMap::with_capacity(objects.len());
        let mut total = 0u64;
        for object in objects {
            let at = Arc::as_ptr(object) as usize;
            let hash = match self.0.remove(&at) {
                Some((_, hash)) => hash,
                None => fingerprint(|h| read(object, h)),
            };
            total = total.wrapping_add(hash);
            next.insert(at, (Arc::clone(object), hash));
        }
        self.0 = next;
        total
    }
}

/// A hash that does not change between passes of the loop (SipHash with fixed keys).
fn fingerprint(write: impl FnOnce(&mut DefaultHasher)) -> u64 {
    let mut hasher = DefaultHasher::new();
    write(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests;
