//! ocifit: a Kubernetes operator that gives every node the container image built for it.
//!
//! One room per concern. The pure rooms (`engine`, `classes`) hold every decision and do no I/O;
//! the adapters around them stay thin, so the controller's status, the webhook's answer and
//! `ocifit resolve` always agree.

pub mod api;
pub mod classes;
pub mod cli;
pub mod controller;
pub mod engine;
pub mod placement;
pub mod registry;
pub mod resolution;
pub mod telemetry;
pub mod webhook;
