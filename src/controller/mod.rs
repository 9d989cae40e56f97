//! The controller: reconciles every ImageSelectionPolicy into per-class images in its status.
//! The decisions are pure and unit-tested (`status`, `platform`, `triggers`, `schedule`, `memo`,
//! `inventory`); the adapters (`watches`, `gather`, `apply`, `reconcile`, `leader`, `runner`,
//! `registry_source`) gather their inputs from the apiserver and the registry and apply the
//! result. It must not decide anything the webhook or `ocifit resolve` decides differently: all
//! three call the same `resolution` function. It must not serve HTTP (telemetry and the webhook
//! do) nor parse flags (the CLI does).

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
