//! Telemetry: structured logs (text or JSON, filtered by `RUST_LOG`) and the Prometheus metrics
//! the admin server serves. It owns metric names and label sets; it must not decide anything the
//! controller decides, only count it.

mod logs;
mod metrics;

pub use logs::{LogFormat, LogsError, init_logs};
pub use metrics::{Metrics, ReconcileResult};
