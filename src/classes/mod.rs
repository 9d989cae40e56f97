//! Node classes: nodes grouped by the values of the keys an artifact reads, so each kind of node is
//! evaluated once; and which nodes a pod's nodeSelector and required node affinity allow. Pure.

pub mod grouping;
pub mod selection;
