//! The artifact cache: its CRD on a real apiserver, and workflows on a real node through the chart.

mod crd;
mod from_outside;
mod held;
pub(crate) mod object_store;
mod replica_loss;
mod restricted;
mod seed_examples;
mod step_code;
mod upgrade;
pub(crate) mod workflow;
