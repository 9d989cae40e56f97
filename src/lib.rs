//! ocifit: a Kubernetes operator that gives every node the container image built for it.
//!
//! Rooms by floor (CONTRIBUTING.md, "Layout"; `tests/components/architecture.rs` keeps them):
//! footing `engine`, `platform`; ground `api`, `classes`, `process`, `registry`, `telemetry`;
//! shared `cluster`, `admission`, `step_helper`; features `image_selection`, `placement`,
//! `artifact_cache` (each used through its `mod.rs`); top `startup`, then `cli`.

// An item is `pub` only where the crate's API exports it (through a room's door); inside a room
// it is `pub(crate)` at most.
#![warn(unreachable_pub)]

pub mod admission;
pub mod api;
pub mod artifact_cache;
pub mod classes;
pub mod cli;
pub mod cluster;
pub mod engine;
pub mod image_selection;
pub mod placement;
pub mod platform;
pub mod process;
pub mod registry;
pub mod startup;
pub mod step_helper;
pub mod telemetry;
