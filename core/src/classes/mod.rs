//! Node classes: nodes grouped by the values of the keys an artifact reads, so each kind of node is
//! evaluated once; and which nodes a pod's nodeSelector and required node affinity allow. Pure.

mod grouping;
mod selection;
pub use grouping::{
    ARCH_LABEL, CONTROL_PLANE_LABELS, NodeClass, OS_LABEL, distinguishes, group, node_counts,
};
pub use selection::{
    ClassSelector, Narrowed, NodeView, Placement, SelectionError, narrow, pin, required_terms,
};
