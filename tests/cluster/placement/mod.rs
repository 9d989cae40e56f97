//! Platform placement: the gate, the controller that releases pods, node tainting and the way out.

mod audit;
mod end_to_end;
mod evict;
mod exec_format;
mod fail_open;
mod node_labels;
mod real_node;
mod registry;
mod taints;
mod way_out;
mod with_selection;
