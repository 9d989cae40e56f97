//! Structured logs through `tracing`: human-readable text or one JSON object per line, with the
//! filter from `RUST_LOG` (default `info`). Each reconcile and each admission review runs in a
//! span with an id of its own ([`reconcile_span`], [`review_span`]): every line logged within it
//! carries the span's fields (JSON: `span` and `spans`), so one reconcile's lines can be found
//! together.

use std::sync::atomic::{AtomicU64, Ordering};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use super::Controller;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The logger could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    /// `RUST_LOG` does not parse as a filter.
    #[error("RUST_LOG is not a valid log filter")]
    Filter(#[source] tracing_subscriber::filter::FromEnvError),
    /// A global logger is already installed.
    #[error("failed to install the logger")]
    Install(#[source] tracing_subscriber::util::TryInitError),
}

/// Installs the global logger writing to stderr.
pub fn init_logs(format: LogFormat) -> Result<(), LogsError> {
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = EnvFilter::builder()
        .with_default_directive(tracing::level_filters::LevelFilter::INFO.into())
        .from_env()
        .map_err(LogsError::Filter)?;
    match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .finish()
            .try_init(),
        LogFormat::Json => json_logs(filter, std::io::stderr).try_init(),
    }
    .map_err(LogsError::Install)
}

/// The JSON logger: one object per line, the event's fields at the top level, the current span
/// (`span`) and every span it is in (`spans`) with their fields.
fn json_logs<W>(filter: EnvFilter, writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(true)
        .finish()
}

/// A new id for a span: 16 hex digits, random (so ids from replicas and restarts do not
/// collide), or counted should the system's random source fail.
fn span_id() -> String {
    static COUNTED: AtomicU64 = AtomicU64::new(0);
    let id = getrandom::u64().unwrap_or_else(|_| COUNTED.fetch_add(1, Ordering::Relaxed));
    format!("{id:016x}")
}

/// The span one reconcile of `controller` runs in, with a `reconcile_id` of its own.
pub fn reconcile_span(controller: Controller) -> tracing::Span {
    tracing::info_span!(
        "reconcile",
        controller = controller.as_str(),
        reconcile_id = %span_id()
    )
}

/// The span one admission review on `route` is answered in, with a `review_id` of its own.
pub fn review_span(route: &str) -> tracing::Span {
    tracing::info_span!("review", route, review_id = %span_id())
}

/// An error with its causes, `: `-separated, for logs, conditions and Events; a cause whose text the
/// message already ends with is not repeated.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Log lines written to memory.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Lines {
        type Writer = Lines;
        fn make_writer(&'w self) -> Lines {
            self.clone()
        }
    }

    #[test]
    fn the_lines_of_one_reconcile_share_its_id_and_another_reconcile_has_another() {
        let lines = Lines::default();
        let logs = json_logs(EnvFilter::new("info"), lines.clone());
        tracing::subscriber::with_default(logs, || {
            for pod in ["a", "b"] {
                let _reconcile = reconcile_span(Controller::Placement).entered();
                tracing::info!(pod, "inspecting");
                tracing::info!(pod, "placement decided");
            }
            let _review = review_span("/placement").entered();
            tracing::info!("answered");
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 5, "{text}");
        let id =
            |line: &serde_json::Value, field: &str| line["span"][field].as_str().map(str::to_owned);
        let ids: Vec<_> = lines[..4].iter().map(|l| id(l, "reconcile_id")).collect();
        assert!(ids[0].as_ref().is_some_and(|id| id.len() == 16), "{text}");
        assert_eq!(ids[0], ids[1], "one reconcile, one id: {text}");
        assert_eq!(ids[2], ids[3], "{text}");
        assert_ne!(ids[0], ids[2], "another reconcile, another id: {text}");
        assert_eq!(lines[0]["span"]["controller"], "placement", "{text}");
        assert_eq!(
            lines[0]["pod"], "a",
            "the event's own fields stay at the top: {text}"
        );
        assert_eq!(lines[4]["span"]["route"], "/placement", "{text}");
        assert!(id(&lines[4], "review_id").is_some(), "{text}");
    }

    #[test]
    fn error_chains_name_every_cause() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let err = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&err), "outer: inner");
        #[derive(Debug, thiserror::Error)]
        #[error("at set 0: inner")]
        struct Repeating(#[source] std::io::Error);
        let err = Repeating(std::io::Error::other("inner"));
        assert_eq!(error_chain(&err), "at set 0: inner");
    }
}
