//! The admission webhook: the pod contract of DESIGN.md applied to opted-in pods at admission.
//! It holds the planner, the pure decision (which policy, which image, which classes, the JSON
//! patch or the denial), and the managed certificates (the operator's own CA and serving
//! certificate, kept in a Secret and in the webhook configuration's `caBundle`); the HTTP side
//! that parses AdmissionReviews, keeps the planner's index fresh from the stores and emits Events
//! stays thin.

pub mod certificates;
pub mod planner;
