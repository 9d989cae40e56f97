//! ocifit: a Kubernetes operator that gives every node the container image built for it.
//!
//! Rooms by floor (see `CONTRIBUTING.md`, "Layout"): a room depends only on rooms of lower
//! floors, never on a sibling of its own floor, and `tests/components/architecture.rs` keeps it so.
//!
//! - footing: `engine` (the compatibility engine), `platform` (the one platform model);
//! - ground: `api`, `classes`, `process` (tasks, shutdown, the `Feature` face, the watch
//!   backoff), `registry`, `telemetry`;
//! - shared: `cluster` (the cluster view), `admission` (the one admission host), `step_helper`
//!   (the program run inside a step's pod, and its command line);
//! - features: `image_selection` (with its decision, `resolution`), `placement`,
//!   `artifact_cache`; `startup` and `cli` use each through its face (its `mod.rs`);
//! - top: `startup` (configuration, composing the features, supervision), then `cli`.

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
