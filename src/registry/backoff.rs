//! Backoff per registry and credentials: after a registry fails as a whole for one set of
//! credentials (unreachable, timing out, 5xx, rate limiting), further lookups on it with those
//! credentials fail fast for a growing delay instead of piling requests on it; one success clears
//! it. Registries limit rates per client, so one tenant's anonymous 429s never back off another's
//! authenticated reads. Failures of one image (not found, unauthorized, bad content) say nothing
//! about the registry and do not count. Pure: the time is passed in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::error::{Error, ErrorKind};
use crate::process::growing_delay;

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
