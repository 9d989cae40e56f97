//! Placement's admission route, `POST /placement` on Pods: the gate planner over the usable
//! policies and the namespaces' labels, both held in memory. No registry I/O and no write: a
//! selected pod gets the scheduling gate and the tracking label, every other pod passes as sent.
//! Reinvoked on its own output it plans nothing (the gate planner sees the gate). The one read:
//! a namespace the store does not hold yet (created a moment before its first pod) is read from
//! the apiserver, so its labels select as they will once the watch has it.

use std::collections::BTreeMap;

use crate::admission::Request;
use k8s_openapi::api::core::v1::Namespace as NamespaceObject;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use super::{ReadNamespace, name_only};
use crate::admission::{Planner, Response, Verdict};
use crate::placement::planner::UsablePolicies;
use crate::placement::planner::{GatePlan, Leave, plan_gate};
use crate::placement::planner::{GatePod, PodView};
use crate::placement::planner::{Namespace, select};

/// The path the webhook configuration's second webhook calls.
pub const PATH: &str = "/placement";

/// Plans pod creations: gate the selected ones.
#[derive(Clone)]
pub struct GatePods {
    pub policies: UsablePolicies,
    /// Namespace metadata (for namespace selectors).
    pub namespaces: Store<PartialObjectMeta<NamespaceObject>>,
    /// Reads a namespace the store does not hold; `None` takes its name label alone.
    pub read_namespace: Option<ReadNamespace>,
    /// ocifit's own namespace, never selected.
    pub own_namespace: String,
}

impl GatePods {
    /// The pod and its namespace's name, if the request carries a pod.
    fn pod_of(request: &Request<GatePod>) -> Option<(PodView<'_>, &str)> {
        let pod = request.object.as_deref()?;
        let namespace = request
            .namespace
            .as_deref()
            .or(pod.metadata.namespace.as_deref())
            .unwrap_or_default();
        Some((pod.into(), namespace))
    }

    /// The plan for `pod` in `namespace` labelled `labels`.
    fn decide(
        &self,
        pod: PodView<'_>,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> GatePlan {
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
        plan_gate(pod, selection)
    }

    /// The plan for `pod` in `namespace` as the store holds it, or `None` if it does not.
    fn decide_stored(&self, pod: PodView<'_>, namespace: &str) -> Option<GatePlan> {
        let stored = self.namespaces.get(&ObjectRef::new(namespace))?;
        Some(match stored.metadata.labels.as_ref() {
            Some(labels) => self.decide(pod, namespace, labels),
            None => self.decide(pod, namespace, &name_only(namespace)),
        })
    }
}

impl Planner for GatePods {
    type Object = GatePod;
    type Plan = GatePlan;

    // Never waits on the connection's worker: the usable policies' selectors against the pod
    // (whose size the host caps) and its namespace's labels, all in memory; a namespace the
    // store does not hold yet is read on the pool (`plan_now` declines).
    const BOUNDED: bool = true;

    fn plan(&self, request: &Request<GatePod>) -> GatePlan {
        let Some((pod, namespace)) = Self::pod_of(request) else {
            return GatePlan::Leave(Leave::Unselected);
        };
        self.decide_stored(pod, namespace).unwrap_or_else(|| {
            let read = self
                .read_namespace
                .as_ref()
                .and_then(|read| read.read(namespace));
            // Not read in time: its name label is all it is sure to carry.
            let labels = read.unwrap_or_else(|| name_only(namespace));
            self.decide(pod, namespace, &labels)
        })
    }

    fn plan_now(&self, request: &Request<GatePod>) -> Option<GatePlan> {
        let Some((pod, namespace)) = Self::pod_of(request) else {
            return Some(GatePlan::Leave(Leave::Unselected));
        };
        match self.decide_stored(pod, namespace) {
            Some(plan) => Some(plan),
            None if self.read_namespace.is_some() => None,
            None => Some(self.decide(pod, namespace, &name_only(namespace))),
        }
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
                GatePlan::Gate { patch, .. } => Some(patch.into()),
                GatePlan::Leave(_) => None,
            },
            warnings: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
