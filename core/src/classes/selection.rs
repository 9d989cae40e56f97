//! Node selection: which nodes a pod's `nodeSelector` and required node affinity allow, with
//! kube-scheduler's semantics (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`);
//! pinning a pod to node classes by ANDing required node affinity into it; narrowing a gated pod
//! to label values (platform placement); a short description of a pod's selector for denials.
//! Where the scheduler would treat a malformed requirement as "matches nothing", this is an
//! error, so the webhook denies with a message; so is a selection over [`limits`]. Pure: never
//! groups nodes, chooses images or talks to the apiserver.

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
/// validated once so matching cannot fail. `Display` is the short description in denials, e.g.
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
mod tests;
