//! The controller part of image selection: reconciles every ImageSelectionPolicy into per-class
//! images in its status. The decisions are pure and unit-tested (`triggers`, `schedule`, `memo`;
//! the status itself is `resolution`'s); the adapters (`gather`, `apply`, `reconcile`, `runner`,
//! `registry_source`) gather their inputs from the cluster view and the registry and apply the
//! result. It must not decide anything the webhook or `ocifit resolve` decides differently: all
//! three call `resolution`. It must not serve HTTP nor parse flags.

mod apply;
pub mod context;
pub mod error;
mod gather;
pub mod memo;
pub mod reconcile;
pub mod registry_source;
pub mod runner;
pub mod schedule;
pub mod source;
pub mod trackers;
pub mod triggers;
