//! Telemetry: structured logs (text or JSON, filtered by `RUST_LOG`), the Prometheus metrics and
//! the admin HTTP server that serves them with the health endpoints. It owns metric names and label
//! sets; it must not decide anything the controller decides, only count it.

mod admin;
mod logs;
mod metrics;

pub use admin::Health;

pub use admin::admin_server;
pub use logs::{LogFormat, LogsError, error_chain, init_logs, reconcile_span, review_span};
pub use metrics::{
    Certificate, Controller, Metrics, PolicyGates, ReconcileResult, ScrapeFn, StepTransfer,
    snake_case,
};
