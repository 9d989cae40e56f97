//! Node selection: which nodes a pod's `nodeSelector` and required node affinity allow (all of
//! them, with kube-scheduler's semantics), pinning a pod to node classes by ANDing required node
//! affinity into it, narrowing a gated pod to label values (platform placement), and a short
//! human description of a pod's selector for denial messages.
//! Pure: it reads Kubernetes types and plain node data, and never groups nodes into classes,
//! chooses images or talks to the apiserver.
//!
//! Semantics follow `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`: the nodeSelector
//! map is ANDed with the required affinity; terms are ORed; a term's matchExpressions and
//! matchFields are ANDed; an empty term, and an empty list of terms, match no node. Where the
//! scheduler would silently treat a malformed requirement as "matches nothing", this module
//! returns an error instead, so the webhook can deny the pod with a message rather than guess.
//! A selection larger than [`limits`] allows is an error too, before anything is matched: the
//! pod's author decides its size, and each node it is matched against costs that much.

mod error;
mod limits;
mod pin;
mod require;
mod requirement;
mod view;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PodSpec};

pub use error::SelectionError;
pub use pin::{ClassSelector, pin};
pub use require::{Narrowed, narrow};
use requirement::Term;
pub use view::NodeView;

/// The terms of the pod's required node affinity (none when it has none).
pub fn required_terms(spec: &PodSpec) -> &[NodeSelectorTerm] {
    pin::required_selector(spec.affinity.as_ref())
        .map(|required| required.node_selector_terms.as_slice())
        .unwrap_or_default()
}

/// Which nodes a pod may run on: its `nodeSelector` ANDed with its required node affinity,
/// validated once so matching cannot fail.
///
/// `Display` gives the short description used in denial messages, e.g.
/// `nodeSelector {disktype=ssd} and affinity (zone In [a, b]) or (gpu Exists)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    node_selector: BTreeMap<String, String>,
    /// `None` when the pod has no required node affinity; `Some` of an empty list matches no node.
    required: Option<Vec<Term>>,
}

impl Placement {
    /// Reads and validates the pod's `nodeSelector` and
    /// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub fn from_pod_spec(spec: &PodSpec) -> Result<Self, SelectionError> {
        limits::check(spec)?;
        let required = pin::required_selector(spec.affinity.as_ref())
            .map(|selector| {
                selector
                    .node_selector_terms
                    .iter()
                    .enumerate()
                    .map(|(index, term)| Term::parse(index, term))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        Ok(Self {
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            required,
        })
    }

    /// Whether the pod may run on `node`.
    pub fn matches<N: NodeView + ?Sized>(&self, node: &N) -> bool {
        let selector_holds = self
            .node_selector
            .iter()
            .all(|(key, value)| node.label(key) == Some(value.as_str()));
        selector_holds
            && self
                .required
                .as_ref()
                .is_none_or(|terms| terms.iter().any(|term| term.matches(node)))
    }

    /// Every node of `nodes` the pod may run on, in the order given.
    pub fn candidates<'n, N: NodeView + 'n>(
        &self,
        nodes: impl IntoIterator<Item = &'n N>,
    ) -> Vec<&'n N> {
        nodes
            .into_iter()
            .filter(|node| self.matches(*node))
            .collect()
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.node_selector.is_empty() && self.required.is_none() {
            return f.write_str("any node");
        }
        if !self.node_selector.is_empty() {
            f.write_str("nodeSelector {")?;
            for (index, (key, value)) in self.node_selector.iter().enumerate() {
                if index > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{key}={value}")?;
            }
            f.write_str("}")?;
            if self.required.is_some() {
                f.write_str(" and ")?;
            }
        }
        match self.required.as_deref() {
            None => Ok(()),
            Some([]) => f.write_str("affinity with no terms (matches no node)"),
            Some(terms) => {
                f.write_str("affinity ")?;
                for (index, term) in terms.iter().enumerate() {
                    if index > 0 {
                        f.write_str(" or ")?;
                    }
                    write!(f, "({term})")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
