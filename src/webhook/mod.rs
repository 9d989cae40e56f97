//! The admission webhook: the pod contract of DESIGN.md applied to opted-in pods at admission.
//! For now it holds only the planner, the pure decision (which policy, which image, which
//! classes, the JSON patch or the denial); the HTTP side that parses AdmissionReviews, keeps the
//! planner's index fresh from the stores and emits Events comes later, and stays thin.

pub mod planner;
