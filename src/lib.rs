//! ocifit: a Kubernetes operator that gives every node the container image built for it.
//!
//! Rooms by floor (CONTRIBUTING.md, "Layout"; `tests/components/architecture.rs` keeps them):
//! footing `engine`, `platform` (both from `ocifit-core`), `process`; ground `api`, `classes`
//! (`ocifit-core`), `registry`, `telemetry`; shared `cluster`, `admission`, `step_helper`; features
//! `image_selection`, `placement`, `artifact_cache`; top `startup`, then `cli`. Each room is
//! entered through its door (its `mod.rs`) only.

// An item is `pub` only where the crate's API exports it (through a room's door); inside a room
// it is `pub(crate)` at most.
#![warn(unreachable_pub)]

pub use ocifit_core::{classes, engine, platform};

pub mod admission;
pub mod api;
pub mod artifact_cache;
pub mod cli;
pub mod cluster;
pub mod image_selection;
pub mod placement;
pub mod process;
pub mod registry;
pub mod startup;
pub mod step_helper;
pub mod telemetry;
