//! Backoff per registry: after a registry fails as a whole (unreachable, timing out, 5xx, rate
//! limiting), further lookups on it fail fast for a growing delay instead of piling requests on
//! it; one success clears it. Failures of one image (not found, unauthorized, bad content) say
//! nothing about the registry and do not count. Pure: the time is passed in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::error::{Error, ErrorKind};

/// How long a failing registry is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// After the first failure; doubled after each further one.
    pub first: Duration,
    /// The longest.
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
pub struct Cooling {
    pub retry_in: Duration,
    pub last_error: String,
}

#[derive(Debug, Clone)]
struct State {
    failures: u32,
    until: Instant,
    last_error: String,
}

/// Backoff state of every registry, by host.
#[derive(Debug, Default)]
pub struct Backoffs {
    policy: BackoffPolicy,
    hosts: HashMap<String, State>,
}

impl Backoffs {
    pub fn new(policy: BackoffPolicy) -> Self {
        Backoffs {
            policy,
            hosts: HashMap::new(),
        }
    }

    /// Whether `host` is being left alone at `now`.
    pub fn check(&self, host: &str, now: Instant) -> Option<Cooling> {
        let state = self.hosts.get(host)?;
        (now < state.until).then(|| Cooling {
            retry_in: state.until - now,
            last_error: state.last_error.clone(),
        })
    }

    /// Records the outcome of a lookup on `host` at `now`.
    pub fn record(&mut self, host: &str, outcome: Result<(), &Error>, now: Instant) {
        match outcome {
            Ok(()) => {
                self.hosts.remove(host);
            }
            Err(error) if counts_against_registry(error.kind()) => {
                let state = self.hosts.entry(host.to_owned()).or_insert(State {
                    failures: 0,
                    until: now,
                    last_error: String::new(),
                });
                state.failures = state.failures.saturating_add(1);
                let doublings = state.failures.saturating_sub(1).min(16);
                let wait = self
                    .policy
                    .first
                    .saturating_mul(1 << doublings)
                    .min(self.policy.max);
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

    #[test]
    fn a_failing_registry_is_left_alone_for_a_doubling_delay() {
        let mut backoffs = Backoffs::new(BackoffPolicy::default());
        let start = Instant::now();
        backoffs.record(HOST, Err(&down()), start);
        let cooling = backoffs.check(HOST, start).unwrap();
        assert_eq!(cooling.retry_in, Duration::from_secs(1));
        assert!(cooling.last_error.contains("connection refused"));
        assert_eq!(backoffs.check(HOST, start + Duration::from_secs(1)), None);
        backoffs.record(HOST, Err(&down()), start);
        assert_eq!(
            backoffs.check(HOST, start).unwrap().retry_in,
            Duration::from_secs(2)
        );
        assert_eq!(backoffs.check("other.example.com", start), None);
    }

    #[test]
    fn the_delay_is_capped_and_a_success_clears_it() {
        let mut backoffs = Backoffs::new(BackoffPolicy::default());
        let now = Instant::now();
        for _ in 0..40 {
            backoffs.record(HOST, Err(&down()), now);
        }
        assert_eq!(
            backoffs.check(HOST, now).unwrap().retry_in,
            Duration::from_secs(60)
        );
        backoffs.record(HOST, Ok(()), now);
        assert_eq!(backoffs.check(HOST, now), None);
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
        };
        backoffs.record(HOST, Err(&not_found), now);
        backoffs.record(HOST, Err(&unauthorized), now);
        assert_eq!(backoffs.check(HOST, now), None);
    }

    #[test]
    fn a_long_retry_after_is_honoured() {
        let mut backoffs = Backoffs::new(BackoffPolicy::default());
        let now = Instant::now();
        let limited = Error::RateLimited {
            target: target(),
            retry_after: Some(Duration::from_secs(30)),
        };
        backoffs.record(HOST, Err(&limited), now);
        assert_eq!(
            backoffs.check(HOST, now).unwrap().retry_in,
            Duration::from_secs(30)
        );
    }
}
