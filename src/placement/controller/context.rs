//! What a placement reconcile reads: the cluster view, the policies as stored, the shared
//! inspector, ocifit's own credentials, the Event reporter and metrics, and the schedule of the
//! next inspection of each pod that failed one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use super::slots::NamespaceSlots;
use crate::api::PlacementPolicy;
use crate::cluster::ClusterView;
use crate::cluster::events::EventReporter;
use crate::placement::policy::Policy;
use crate::placement::retries::Retries;
use crate::registry::{DockerConfig, Inspector};
use crate::telemetry::Metrics;

/// What a reconcile reads.
pub struct Context {
    /// The cluster view (client, leadership).
    pub cluster: ClusterView,
    /// The policies as stored.
    pub policies: Store<PlacementPolicy>,
    /// Image inspection, shared by every pod.
    pub inspector: Inspector,
    /// ocifit's own registry credentials, tried after the pod's.
    pub own_credentials: DockerConfig,
    /// Events on pods and owners.
    pub reporter: EventReporter,
    /// Metrics to count into.
    pub metrics: Arc<Metrics>,
    /// ocifit's own namespace (its pods are never placed).
    pub own_namespace: String,
    /// When each pod that failed an inspection is looked at again.
    pub retries: Mutex<Retries>,
    /// Reconciles in flight per namespace.
    pub slots: NamespaceSlots,
    /// Namespace metadata, when the gate's route keeps it in memory (else read when needed).
    pub namespaces: Option<Store<PartialObjectMeta<Namespace>>>,
}

impl Context {
    /// The usable policy `name`, or why there is none.
    pub fn usable_policy(&self, name: &str) -> Result<Policy, String> {
        let stored = self
            .policies
            .get(&ObjectRef::new(name))
            .ok_or_else(|| format!("placement policy {name} no longer exists"))?;
        Policy::compile(&stored)
            .map_err(|err| format!("placement policy {name} cannot be used: {err}"))
    }

    /// The labels of namespace `name` as the gate's store holds them, if it holds it.
    pub fn stored_namespace_labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let stored = self.namespaces.as_ref()?.get(&ObjectRef::new(name))?;
        Some(stored.metadata.labels.clone().unwrap_or_default())
    }

    /// The retry schedule.
    pub fn retries(&self) -> MutexGuard<'_, Retries> {
        // Every update is one insert or remove: the map stays consistent after a panic.
        self.retries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The architectures whose nodes ocifit taints (every policy's node tainting together).
    pub fn tainted(&self) -> BTreeSet<String> {
        self.policies
            .state()
            .iter()
            .filter_map(|policy| Policy::compile(policy).ok())
            .flat_map(|policy| policy.tainted)
            .collect()
    }
}
