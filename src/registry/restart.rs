//! Transfers that broke off started again, a bounded number of times. Behind a Service over several
//! registry replicas (an artifact cache on object storage), the replica serving a push or a pull
//! may die mid-body; the next attempt reaches a surviving one. Which failures count as broken off
//! and how long to wait is decided here, without I/O; [`restarting`] is the loop.

use std::future::Future;
use std::time::Duration;

use super::error::Error;
use crate::process::growing_delay;

/// How often a broken-off transfer is tried, and the waits between tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restarts {
    /// Tries of one transfer, the first included.
    pub attempts: u32,
    /// The wait before the second try; doubled before each further one.
    pub first: Duration,
    pub longest: Duration,
}

impl Default for Restarts {
    /// Six tries over 23 s of waits (1, 2, 4, 8, 8): longer than a Service takes to stop sending
    /// connections to a replica that died, so the later tries reach a living one.
    fn default() -> Self {
        Restarts {
            attempts: 6,
            first: Duration::from_secs(1),
            longest: Duration::from_secs(8),
        }
    }
}

impl Restarts {
    /// The wait after try number `attempt` (1 for the first) broke off, or `None` when it was the
    /// last one allowed.
    pub fn after(&self, attempt: u32) -> Option<Duration> {
        (attempt < self.attempts).then(|| growing_delay(self.first, self.longest, attempt))
    }
}

/// A failure that may not happen again when the transfer starts over.
pub trait BrokeOff {
    /// Whether the transfer broke off (the connection, the registry's answer) rather than being
    /// refused for what it carried or who sent it.
    fn broke_off(&self) -> bool;
}

impl BrokeOff for Error {
    /// The connection failed or was cut, the registry answered with a server error, or it no
    /// longer knows the upload session (another replica, or one restarted, without its state).
    fn broke_off(&self) -> bool {
        match self {
            Error::Transport { .. } => true,
            Error::NotFound { what, .. } => *what == "upload",
            _ => false,
        }
    }
}

/// A transfer given up: refused at once, or broken off on every try.
#[derive(Debug)]
pub enum GaveUp<E> {
    /// A failure that another try would not mend.
    Refused(E),
    /// Every one of `attempts` tries broke off; `last` is the last one's failure.
    Exhausted { attempts: u32, last: E },
}

/// Runs `transfer` until it succeeds, fails in a way another try would not mend, or has broken
/// off as often as `restarts` allows. `what` names it in the log.
pub async fn restarting<T, E, F, Fut>(
    restarts: &Restarts,
    what: &str,
    mut transfer: F,
) -> Result<T, GaveUp<E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: BrokeOff + std::fmt::Display,
{
    let mut attempt = 1;
    loop {
        match transfer().await {
            Ok(done) => return Ok(done),
            Err(err) if !err.broke_off() => return Err(GaveUp::Refused(err)),
            Err(err) => match restarts.after(attempt) {
                Some(wait) => {
                    tracing::warn!(what, attempt, ?wait, error = %err, "transfer broke off; starting it again");
                    tokio::time::sleep(wait).await;
                }
                None => {
                    return Err(GaveUp::Exhausted {
                        attempts: attempt,
                        last: err,
                    });
                }
            },
        }
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Target;

    fn target() -> Target {
        Target {
            registry: "cache:5000".into(),
            repository: "w/run".into(),
            reference: "out".into(),
        }
    }

    #[test]
    fn the_waits_grow_and_stop_at_the_last_try() {
        let restarts = Restarts::default();
        let waits: Vec<_> = (1..=6).map(|a| restarts.after(a)).collect();
        let s = |n| Some(Duration::from_secs(n));
        assert_eq!(waits, vec![s(1), s(2), s(4), s(8), s(8), None]);
    }

    #[test]
    fn a_cut_connection_a_server_error_and_a_lost_upload_session_broke_off() {
        let cut = Error::Transport {
            target: target(),
            detail: "connection reset".into(),
            source: None,
        };
        let lost = Error::NotFound {
            target: target(),
            what: "upload",
        };
        assert!(cut.broke_off());
        assert!(lost.broke_off());
    }

    #[test]
    fn a_refusal_or_a_missing_artifact_is_not_tried_again() {
        let refused = Error::Unauthorized {
            target: target(),
            status: 401,
            access: crate::registry::Access::Push,
        };
        let missing = Error::NotFound {
            target: target(),
            what: "manifest",
        };
        assert!(!refused.broke_off());
        assert!(!missing.broke_off());
    }
}
