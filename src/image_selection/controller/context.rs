//! What every reconcile shares: the cluster view, the policy store, the registry seam, the Event
//! reporter, metrics, and the per-policy memory (artifact memo, what each policy reads from
//! nodes, the last status written).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::runtime::reflector::Store;

use super::Source;
use super::resolution_memory::Backoff;
use super::resolution_memory::Memo;
use super::trackers::{Interest, Interests};
use super::trackers::{InventoryVersion, Tracked};
use crate::api::{ImageSelectionPolicy, ImageSelectionPolicyStatus};
use crate::cluster::ClusterView;
use crate::cluster::EventReporter;
use crate::cluster::node_inputs;
use crate::engine::NodeInputs;
use crate::telemetry::Metrics;

#[derive(Clone, Debug)]
pub struct ControllerTunables {
    /// Retry waits after failed artifact resolutions and API errors.
    pub backoff: Backoff,
    /// How long node triggers are held to coalesce a burst into one reconcile.
    pub debounce: Duration,
    /// How many policies are reconciled at once, besides the managed ones' share.
    pub concurrency: u16,
    /// The share of the policies ocifit took charge of for pods' `image-ref`s.
    pub managed: ManagedShare,
}

/// What the policies ocifit took charge of may use: their own reconciles, apart from the ones
/// admins' policies get, and a deadline on each resolution, so a registry any pod author names
/// never holds back an admin's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManagedShare {
    /// Managed policies resolved at once.
    pub concurrency: u16,
    /// Longest one resolution (the artifact and every image it names) may take.
    pub deadline: Duration,
}

impl Default for ManagedShare {
    fn default() -> Self {
        ManagedShare {
            concurrency: 2,
            deadline: Duration::from_secs(60),
        }
    }
}

impl Default for ControllerTunables {
    fn default() -> Self {
        ControllerTunables {
            backoff: Backoff::default(),
            debounce: Duration::from_millis(200),
            concurrency: 4,
            managed: ManagedShare::default(),
        }
    }
}

/// Shared by every reconcile.
pub(super) struct Context {
    pub(super) cluster: ClusterView,
    pub(super) policies: Store<ImageSelectionPolicy>,
    pub(super) source: Arc<dyn Source>,
    pub(super) reporter: EventReporter,
    pub(super) metrics: Arc<Metrics>,
    pub(super) interests: Interests,
    version: InventoryVersion,
    inventories: Mutex<HashMap<Shape, (u64, Inventory)>>,
    pub(super) settings: ControllerTunables,
    /// Places for managed policies' resolutions ([`ManagedShare::concurrency`]).
    pub(super) managed_places: Arc<tokio::sync::Semaphore>,
    memos: Mutex<HashMap<String, Memo>>,
    written: Mutex<HashMap<String, ImageSelectionPolicyStatus>>,
    api_failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    /// A context over the given parts.
    pub(super) fn new(
        cluster: ClusterView,
        policies: Store<ImageSelectionPolicy>,
        source: Arc<dyn Source>,
        reporter: EventReporter,
        metrics: Arc<Metrics>,
        tracked: Tracked,
        settings: ControllerTunables,
    ) -> Context {
        Context {
            cluster,
            policies,
            source,
            reporter,
            metrics,
            interests: tracked.interests,
            version: tracked.version,
            inventories: Mutex::default(),
            managed_places: Arc::new(tokio::sync::Semaphore::new(usize::from(
                settings.managed.concurrency,
            ))),
            settings,
            memos: Mutex::default(),
            written: Mutex::default(),
            api_failures: Mutex::default(),
        }
    }

    /// The node inventory as a policy with `interest` reads it: shared by every reconcile with
    /// the same reads while the inventory stays the same (a wave of reconciles copies the
    /// labels once, not once per policy).
    pub(super) fn node_inputs(&self, interest: &Interest) -> Inventory {
        let shape = Shape {
            labels: interest.reads.labels.iter().cloned().collect(),
            selector: interest.node_selector.keys().cloned().collect(),
            features: interest.reads_features(),
        };
        let version = self.version.get();
        if let Some((at, inventory)) = lock(&self.inventories).get(&shape)
            && *at == version
        {
            return Arc::clone(inventory);
        }
        let features = if shape.features {
            self.cluster.node_features.store().state()
        } else {
            Vec::new()
        };
        let inventory = Arc::new(node_inputs(
            &self.cluster.nodes.store().state(),
            &features,
            &self.cluster.settings.nfd_namespace,
            |key| interest.reads_label(key),
        ));
        let mut inventories = lock(&self.inventories);
        inventories.retain(|_, (at, _)| *at == version);
        inventories.insert(shape, (version, Arc::clone(&inventory)));
        inventory
    }

    pub(super) fn memo(&self, policy: &str) -> Option<Memo> {
        lock(&self.memos).get(policy).cloned()
    }

    pub(super) fn remember(&self, policy: &str, memo: Memo) {
        lock(&self.memos).insert(policy.to_owned(), memo);
    }

    pub(super) fn written(&self, policy: &str) -> Option<ImageSelectionPolicyStatus> {
        lock(&self.written).get(policy).cloned()
    }

    pub(super) fn wrote(&self, policy: &str, status: ImageSelectionPolicyStatus) {
        lock(&self.written).insert(policy.to_owned(), status);
    }

    pub(super) fn set_interest(&self, policy: &str, interest: Option<Interest>) {
        let mut interests = self
            .interests
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        match interest {
            Some(interest) => interests.insert(policy.to_owned(), interest),
            None => interests.remove(policy),
        };
    }

    /// Counts a failed reconcile of `policy` and returns how many in a row.
    pub(super) fn api_failed(&self, policy: &str) -> u32 {
        let mut failures = lock(&self.api_failures);
        let n = failures.entry(policy.to_owned()).or_default();
        *n = n.saturating_add(1);
        *n
    }

    pub(super) fn api_succeeded(&self, policy: &str) {
        lock(&self.api_failures).remove(policy);
    }

    /// Forgets policies that no longer exist.
    pub(super) fn forget_except(&self, existing: &[String]) {
        let keep = |name: &String| existing.contains(name);
        lock(&self.memos).retain(|name, _| keep(name));
        lock(&self.written).retain(|name, _| keep(name));
        lock(&self.api_failures).retain(|name, _| keep(name));
        self.interests
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|name, _| keep(name));
    }
}

/// Nodes as (name, inputs), as one kind of policy reads them.
pub(super) type Inventory = Arc<Vec<(String, NodeInputs)>>;

/// What decides which of a node's labels a policy reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Shape {
    labels: Vec<String>,
    selector: Vec<String>,
    features: bool,
}

/// A poisoned lock only means another reconcile panicked; its maps are still consistent.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
