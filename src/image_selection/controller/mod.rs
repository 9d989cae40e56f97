//! The controller part of image selection: reconciles every ImageSelectionPolicy into per-class
//! images in its status. The decisions are pure and unit-tested (`triggers`, `schedule`,
//! `resolution_memory`; the status itself is `resolution`'s); the adapters (`artifact_fetch`,
//! `status_write`, `reconcile`, `runner`, `registry_source`) gather their inputs from the cluster
//! view and the registry and apply the result. It must not decide anything the webhook or
//! `ocifit resolve` decides differently: all three call `resolution`. It must not serve HTTP nor
//! parse flags.

mod artifact_fetch;
pub mod context;
pub mod error;
pub mod reconcile;
pub mod registry_source;
pub mod resolution_memory;
pub mod runner;
pub mod schedule;
pub mod source;
mod status_write;
pub mod trackers;
pub mod triggers;
