//! When a failed registry request is tried again, and after how long. Only transient failures are
//! retried: connection errors, timeouts, 5xx gateway/availability errors and 429 (honouring
//! Retry-After). Pure: no I/O, no clock (the current time is passed in).

use std::time::{Duration, SystemTime};

use jiff::Timestamp;

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
}
