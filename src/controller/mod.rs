//! The controller: reconciles every ImageSelectionPolicy into per-class images in its status.
//! The decisions are pure (`status`, `platform`); the rest gathers their inputs from the
//! apiserver and the registry and applies the result. It must not decide anything the webhook or
//! `ocifit resolve` decides differently: both call the same `resolution` function.

mod apply;
pub mod context;
mod gather;
pub mod inventory;
pub mod leader;
pub mod memo;
pub mod platform;
pub mod reconcile;
pub mod registry_source;
pub mod runner;
pub mod schedule;
pub mod source;
pub mod status;
pub mod triggers;
pub mod watches;
