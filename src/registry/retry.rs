//! Trying again, and when not to. A failed request is retried only when transient (connection
//! errors, timeouts, 5xx gateway/availability errors, 429 honouring Retry-After). A transfer that
//! broke off mid-body (a registry replica behind a Service died) is started again a bounded
//! number of times; [`restarting`] is the loop. A registry that failed as a whole for one set of
//! credentials is left alone for a growing delay ([`Backoffs`]): per credentials, so one
//! tenant's anonymous 429s never back off another's reads, and failures of one image (not found,
//! unauthorized, bad content) do not count. The decisions are pure: the time is passed in.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use jiff::Timestamp;

use super::error::{Error, ErrorKind};
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

/// How long a failing registry is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// After the first failure; doubled after each further one.
    pub first: Duration,
    pub max: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        BackoffPolicy {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

/// A registry being left alone: until when, and the failure that started it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cooling {
    pub retry_in: Duration,
    pub last_error: String,
}

#[derive(Debug, Clone)]
struct State {
    failures: u32,
    until: Instant,
    last_error: String,
}

/// Backoff state of every registry, by host and credentials (a fingerprint; one for anonymous).
#[derive(Debug, Default)]
pub(super) struct Backoffs {
    policy: BackoffPolicy,
    hosts: HashMap<(String, u128), State>,
}

impl Backoffs {
    pub(super) fn new(policy: BackoffPolicy) -> Self {
        Backoffs {
            policy,
            hosts: HashMap::new(),
        }
    }

    /// Whether `host` is being left alone for `credentials` at `now`.
    pub(super) fn check(&self, host: &str, credentials: u128, now: Instant) -> Option<Cooling> {
        let state = self.hosts.get(&(host.to_owned(), credentials))?;
        (now < state.until).then(|| Cooling {
            retry_in: state.until - now,
            last_error: state.last_error.clone(),
        })
    }

    /// Records the outcome of a lookup on `host` with `credentials` at `now`.
    pub(super) fn record(
        &mut self,
        (host, credentials): (&str, u128),
        outcome: Result<(), &Error>,
        now: Instant,
    ) {
        let key = (host.to_owned(), credentials);
        match outcome {
            Ok(()) => {
                self.hosts.remove(&key);
            }
            Err(error) if counts_against_registry(error.kind()) => {
                let state = self.hosts.entry(key).or_insert(State {
                    failures: 0,
                    until: now,
                    last_error: String::new(),
                });
                state.failures = state.failures.saturating_add(1);
                let wait = growing_delay(self.policy.first, self.policy.max, state.failures);
                // A rate limit with a longer Retry-After is honoured.
                let wait = match error {
                    Error::RateLimited {
                        retry_after: Some(after),
                        ..
                    } => wait.max(*after),
                    _ => wait,
                };
                state.until = now + wait;
                state.last_error = error.to_string();
            }
            Err(_) => {}
        }
    }
}

fn counts_against_registry(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::Transport | ErrorKind::RateLimited)
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

    /// The tests of what was `backoff.rs`.
    mod backoff {
        use super::*;
        use crate::registry::Target;

        fn target() -> Target {
            Target {
                registry: "registry.example.com".into(),
                repository: "app".into(),
                reference: "v1".into(),
            }
        }

        fn down() -> Error {
            Error::Transport {
                target: target(),
                detail: "connection refused".into(),
                source: None,
            }
        }

        const HOST: &str = "registry.example.com";
        const ANONYMOUS: u128 = 0;
        const TENANT: u128 = 42;

        #[test]
        fn a_failing_registry_is_left_alone_for_a_doubling_delay() {
            let mut backoffs = Backoffs::new(BackoffPolicy::default());
            let start = Instant::now();
            backoffs.record((HOST, ANONYMOUS), Err(&down()), start);
            let cooling = backoffs.check(HOST, ANONYMOUS, start).unwrap();
            assert_eq!(cooling.retry_in, Duration::from_secs(1));
            assert!(cooling.last_error.contains("connection refused"));
            assert_eq!(
                backoffs.check(HOST, ANONYMOUS, start + Duration::from_secs(1)),
                None
            );
            backoffs.record((HOST, ANONYMOUS), Err(&down()), start);
            assert_eq!(
                backoffs.check(HOST, ANONYMOUS, start).unwrap().retry_in,
                Duration::from_secs(2)
            );
            assert_eq!(backoffs.check("other.example.com", ANONYMOUS, start), None);
        }

        #[test]
        fn the_delay_is_capped_and_a_success_clears_it() {
            let mut backoffs = Backoffs::new(BackoffPolicy::default());
            let now = Instant::now();
            for _ in 0..40 {
                backoffs.record((HOST, ANONYMOUS), Err(&down()), now);
            }
            assert_eq!(
                backoffs.check(HOST, ANONYMOUS, now).unwrap().retry_in,
                Duration::from_secs(60)
            );
            backoffs.record((HOST, ANONYMOUS), Ok(()), now);
            assert_eq!(backoffs.check(HOST, ANONYMOUS, now), None);
        }

        #[test]
        fn image_failures_do_not_count_against_the_registry() {
            let mut backoffs = Backoffs::new(BackoffPolicy::default());
            let now = Instant::now();
            let not_found = Error::NotFound {
                target: target(),
                what: "tag",
            };
            let unauthorized = Error::Unauthorized {
                target: target(),
                status: 401,
                access: crate::registry::Access::Read,
            };
            backoffs.record((HOST, ANONYMOUS), Err(&not_found), now);
            backoffs.record((HOST, ANONYMOUS), Err(&unauthorized), now);
            assert_eq!(backoffs.check(HOST, ANONYMOUS, now), None);
        }

        #[test]
        fn a_long_retry_after_is_honoured() {
            let mut backoffs = Backoffs::new(BackoffPolicy::default());
            let now = Instant::now();
            let limited = Error::RateLimited {
                target: target(),
                retry_after: Some(Duration::from_secs(30)),
            };
            backoffs.record((HOST, ANONYMOUS), Err(&limited), now);
            assert_eq!(
                backoffs.check(HOST, ANONYMOUS, now).unwrap().retry_in,
                Duration::from_secs(30)
            );
        }

        #[test]
        fn one_credentials_rate_limits_leave_another_credentials_reads_alone() {
            let mut backoffs = Backoffs::new(BackoffPolicy::default());
            let now = Instant::now();
            let limited = Error::RateLimited {
                target: target(),
                retry_after: Some(Duration::from_secs(30)),
            };
            for _ in 0..10 {
                backoffs.record((HOST, ANONYMOUS), Err(&limited), now);
            }
            assert!(backoffs.check(HOST, ANONYMOUS, now).is_some());
            assert_eq!(backoffs.check(HOST, TENANT, now), None);
            backoffs.record((HOST, TENANT), Ok(()), now);
            assert!(
                backoffs.check(HOST, ANONYMOUS, now).is_some(),
                "another's success clears nothing"
            );
        }
    }
}
