//! The admission webhook: the pod contract of DESIGN.md applied to opted-in pods at admission,
//! served by every replica of `ocifit run` from memory, with no registry I/O.
//!
//! - [`planner`]: the pure decision (which policy, which image, which classes, the JSON patch or
//!   the denial) over an [`planner::Index`] of the policies and nodes.
//! - [`feed`]: rebuilds that index from the controller's stores when what it reads changes.
//! - [`review`]: AdmissionReview bodies in, responses out; every input yields an answer.
//! - [`server`]: `POST /mutate` over HTTPS (actix-web, rustls), body cap, deadline, metrics.
//! - [`tls`]: the serving certificate, swapped atomically, re-read from files when they change.
//! - [`certificates`]: the managed mode: the operator's own CA and serving certificate, kept in
//!   a Secret and in the webhook configuration's `caBundle`, fed to [`tls`].
//! - [`events`]: rate-limited Events on the policy for denials and pins.
//!
//! The webhook must not write to the apiserver except Events, and must not reach a registry;
//! the managed mode writes only its own Secret and the caBundle of its own webhook
//! configuration.

pub mod certificates;
pub mod events;
pub mod feed;
pub mod planner;
pub mod review;
pub mod server;
pub mod tls;
