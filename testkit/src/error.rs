//! The test kit's error type. Messages carry what a person needs to fix a failed start: the
//! component, what it was waiting for, and the end of the component's log.

use std::path::PathBuf;
use std::time::Duration;

use crate::tools::ToolError;

/// Everything that can go wrong starting or using the local cluster and registry. Its `Debug` is
/// the message and its causes, readable as written, because that is what a failed test's
/// `unwrap()` prints (log tails included).
#[derive(thiserror::Error)]
pub enum Error {
    /// A tool is not installed.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// rcgen could not mint a certificate or key.
    #[error("failed to mint a test certificate")]
    Certificate(#[source] rcgen::Error),
    /// rustls rejected a minted certificate or key.
    #[error("failed to build a TLS configuration from a test certificate")]
    Tls(#[source] rustls::Error),
    /// A file or directory operation failed.
    #[error("failed to {action} {}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No free loopback port could be reserved.
    #[error("failed to find a free port on 127.0.0.1")]
    Port(#[source] std::io::Error),
    /// A program could not be started.
    #[error("failed to start {program}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A component exited while it was being waited for or used.
    #[error(
        "{component} exited ({status}) while waiting for {waiting_for}; last lines of its log:\n{log_tail}"
    )]
    Exited {
        /// The component.
        component: String,
        /// Its exit status.
        status: String,
        /// What the test kit was waiting for.
        waiting_for: String,
        /// The end of its log.
        log_tail: String,
    },
    /// Something did not become ready in time.
    #[error(
        "timed out after {timeout:?} waiting for {what}{}",
        logs_suffix(log_tails)
    )]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        timeout: Duration,
        /// The end of the logs of the components involved.
        log_tails: String,
    },
    /// A Kubernetes API call failed.
    #[error("failed to {action}")]
    Kube {
        /// What was being done.
        action: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The generated kubeconfig was not accepted by kube.
    #[error("failed to load the generated kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    /// A command exited unsuccessfully or did not finish in time.
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status, or that it timed out.
        status: String,
        /// Its standard error (standard output when that is empty).
        output: String,
    },
    /// YAML or JSON could not be read or written.
    #[error("failed to {action}: {message}")]
    Format {
        /// What was being done.
        action: String,
        /// The parser's or serialiser's message.
        message: String,
    },
    /// Ctrl-C or SIGTERM cannot be listened for.
    #[error("failed to listen for Ctrl-C or SIGTERM")]
    Signal(#[source] std::io::Error),
    /// The cluster shared by a test binary's tests failed to start (its error, as first reported).
    #[error("the shared test cluster failed to start: {0}")]
    SharedStart(String),
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")?;
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            write!(f, "\ncaused by: {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

fn logs_suffix(log_tails: &str) -> String {
    if log_tails.is_empty() {
        String::new()
    } else {
        format!("; last lines of the logs:\n{log_tails}")
    }
}

/// Shorthand for results with the test kit's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps an I/O error with the action and path it concerns.
pub(crate) fn io(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}

/// Wraps a kube error with the action it concerns.
pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_message_and_its_causes_unescaped() {
        let err = Error::Io {
            action: "write",
            path: "/x/kubeconfig".into(),
            source: std::io::Error::other("disk full\nreally"),
        };
        assert_eq!(
            format!("{err:?}"),
            "failed to write /x/kubeconfig\ncaused by: disk full\nreally"
        );
    }
}
