//! Trying again. A failed request is retried only when transient: connection errors, timeouts,
//! 5xx gateway/availability errors and 429 (honouring Retry-After). A transfer that broke off is
//! started again a bounded number of times: behind a Service over several registry replicas (an
//! artifact cache on object storage) the replica serving a push or a pull may die mid-body, and
//! the next attempt reaches a surviving one. The decisions are pure (no I/O, the time passed in);
//! [`restarting`] is the loop.

use std::future::Future;
use std::time::{Duration, SystemTime};

use jiff::Timestamp;

use super::error::Error;
use crate::process::growing_delay;

/// How hard to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each further retry.
    pub base_delay: Duration,
    /// Upper bound of the exponential delay.
    pub max_delay: Duration,
    /// The longest Retry-After to wait for; a longer one gives up at once (the caller sees
    /// "rate limited" with the registry's delay and can requeue).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(4),
            max_retry_after: Duration::from_secs(10),
        }
    }
}

/// A failed attempt, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    /// The connection could not be made or broke off.
    Connection,
    /// No complete answer within the request timeout.
    Timeout,
    /// The registry answered with this status (and maybe a Retry-After).
    Status {
        code: u16,
        retry_after: Option<Duration>,
    },
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    RetryIn(Duration),
    GiveUp,
}

/// Decides whether attempt number `attempt` (1 for the first) is followed by another.
pub(super) fn decide(policy: &RetryPolicy, attempt: u32, failure: Failure) -> Decision {
    if attempt >= policy.max_attempts {
        return Decision::GiveUp;
    }
    let backoff = || growing_delay(policy.base_delay, policy.max_delay, attempt);
    match failure {
        Failure::Connection | Failure::Timeout => Decision::RetryIn(backoff()),
        Failure::Status { code, retry_after } if code == 429 || is_transient_status(code) => {
            match retry_after {
                Some(wait) if wait > policy.max_retry_after => Decision::GiveUp,
                Some(wait) => Decision::RetryIn(wait),
                None => Decision::RetryIn(backoff()),
            }
        }
        Failure::Status { .. } => Decision::GiveUp,
    }
}

/// Server errors worth another try: the registry or a proxy in front of it is briefly unwell.
fn is_transient_status(code: u16) -> bool {
    matches!(code, 408 | 500 | 502 | 503 | 504)
}

/// Parses a Retry-After header: delay-seconds or an HTTP date (a date in the past is zero).
pub(super) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let now = Timestamp::try_from(now).ok()?;
    Some(Duration::try_from(when.duration_since(now)).unwrap_or(Duration::ZERO))
}

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

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            max_retry_after: Duration::from_secs(5),
        }
    }

    fn status(code: u16) -> Failure {
        Failure::Status {
            code,
            retry_after: None,
        }
    }

    #[test]
    fn connection_errors_back_off_exponentially_up_to_the_cap() {
        let delays: Vec<Decision> = (1..=4)
            .map(|a| decide(&policy(), a, Failure::Connection))
            .collect();
        let ms = |m| Decision::RetryIn(Duration::from_millis(m));
        assert_eq!(delays, vec![ms(100), ms(200), ms(350), ms(350)]);
    }

    #[test]
    fn attempts_stop_at_the_maximum() {
        assert_eq!(decide(&policy(), 5, Failure::Timeout), Decision::GiveUp);
        let once = RetryPolicy {
            max_attempts: 1,
            ..policy()
        };
        assert_eq!(decide(&once, 1, Failure::Connection), Decision::GiveUp);
    }

    #[test]
    fn server_errors_and_timeouts_are_retried() {
        for code in [408, 500, 502, 503, 504] {
            assert!(
                matches!(decide(&policy(), 1, status(code)), Decision::RetryIn(_)),
                "{code}"
            );
        }
        assert!(matches!(
            decide(&policy(), 1, Failure::Timeout),
            Decision::RetryIn(_)
        ));
    }

    #[test]
    fn client_errors_are_never_retried() {
        for code in [400, 401, 403, 404, 405, 501] {
            assert_eq!(
                decide(&policy(), 1, status(code)),
                Decision::GiveUp,
                "{code}"
            );
        }
    }

    #[test]
    fn rate_limit_waits_as_long_as_retry_after_says() {
        let f = Failure::Status {
            code: 429,
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(
            decide(&policy(), 1, f),
            Decision::RetryIn(Duration::from_secs(2))
        );
    }

    #[test]
    fn rate_limit_without_retry_after_backs_off() {
        assert_eq!(
            decide(&policy(), 2, status(429)),
            Decision::RetryIn(Duration::from_millis(200))
        );
    }

    #[test]
    fn retry_after_beyond_the_limit_gives_up_at_once() {
        let f = Failure::Status {
            code: 429,
            retry_after: Some(Duration::from_secs(60)),
        };
        assert_eq!(decide(&policy(), 1, f), Decision::GiveUp);
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }

    mod restart {
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
}
