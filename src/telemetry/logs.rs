//! Structured logs through `tracing`: human-readable text or one JSON object per line, with the
//! filter from `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.finish().try_init(),
        LogFormat::Json => builder.json().flatten_event(true).finish().try_init(),
    }
    .map_err(LogsError::Install)
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
