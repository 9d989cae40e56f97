//! Placement's admission route, `POST /placement` on Pods: the gate planner over the usable
//! policies and the namespaces' labels, both held in memory. No registry I/O and no write: a
//! selected pod gets the scheduling gate and the tracking label, every other pod passes as sent.
//! Reinvoked on its own output it plans nothing (the gate planner sees the gate).

use k8s_openapi::api::core::v1::{Namespace as NamespaceObject, Pod};
use kube::core::PartialObjectMeta;
use kube::core::admission::AdmissionRequest;
use kube::runtime::reflector::{ObjectRef, Store};
use std::collections::BTreeMap;

use super::compiled::UsablePolicies;
use super::gate::{GatePlan, Leave, plan};
use super::select::{Namespace, select};
use crate::admission::route::{Planner, Response, Verdict};

/// The path the webhook configuration's second webhook calls.
pub const PATH: &str = "/placement";

/// The label the apiserver puts on every namespace, naming it.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Plans pod creations: gate the selected ones.
#[derive(Clone)]
pub struct GatePods {
    /// The usable policies.
    pub policies: UsablePolicies,
    /// Namespace metadata (for namespace selectors).
    pub namespaces: Store<PartialObjectMeta<NamespaceObject>>,
    /// ocifit's own namespace, never selected.
    pub own_namespace: String,
}

impl Planner for GatePods {
    type Object = Pod;
    type Plan = GatePlan;

    // Never waits: the usable policies' selectors against the pod (whose size the host caps) and
    // its namespace's labels, all in memory.
    const BOUNDED: bool = true;

    fn plan(&self, request: &AdmissionRequest<Pod>) -> GatePlan {
        let Some(pod) = request.object.as_ref() else {
            return GatePlan::Leave(Leave::Unselected);
        };
        let namespace = request
            .namespace
            .as_deref()
            .or(pod.metadata.namespace.as_deref())
            .unwrap_or_default();
        let stored = self.namespaces.get(&ObjectRef::new(namespace));
        // A namespace created a moment ago may not be in the store yet; its name label is
        // all it is sure to carry.
        let fallback = BTreeMap::from([(NAMESPACE_NAME_LABEL.to_owned(), namespace.to_owned())]);
        let labels = stored
            .as_ref()
            .and_then(|object| object.metadata.labels.as_ref())
            .unwrap_or(&fallback);
        let policies = self.policies.load();
        let selection = select(
            pod,
            Namespace {
                name: namespace,
                labels,
            },
            &self.own_namespace,
            &policies,
        );
        plan(pod, selection)
    }
}

impl Verdict for GatePlan {
    fn outcome(&self) -> &'static str {
        match self {
            GatePlan::Gate { .. } => "patched",
            GatePlan::Leave(_) => "skipped",
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            GatePlan::Gate { .. } => "Gated",
            GatePlan::Leave(Leave::AlreadyGated) => "AlreadyGated",
            GatePlan::Leave(Leave::Unselected) => "NoPlacementPolicy",
            GatePlan::Leave(Leave::Excluded(_)) => "Excluded",
        }
    }

    fn response(&self) -> Response<'_> {
        Response::Allow {
            patch: match self {
                GatePlan::Gate { patch, .. } => Some(patch),
                GatePlan::Leave(_) => None,
            },
            warnings: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
