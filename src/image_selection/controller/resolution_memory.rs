//! What the controller remembers per policy between reconciles: the last resolution (and the
//! last good one, served during outages), when it was made, and consecutive failures. Node
//! changes reconcile from here without registry I/O; the registry is asked again only when the
//! refresh interval (or, after a failure, a growing [`Backoff`]) has passed or the source
//! changed. Pure: time is passed in as `Instant`s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Fetched, Request};
use crate::image_selection::resolution::Failure;
use crate::process::growing_delay;

/// The outcome of the last resolution.
#[derive(Clone, Debug)]
pub(super) enum Outcome {
    /// Resolved.
    Current(Arc<Fetched>),
    /// Failed, with the reason and message.
    Failed(Failure),
}

/// One policy's memory.
#[derive(Clone, Debug)]
pub(super) struct Memo {
    /// What was resolved (reference and credentials key).
    pub request: Request,
    /// The last outcome.
    pub outcome: Outcome,
    /// The last successful resolution, served while the current one fails.
    pub last_good: Option<Arc<Fetched>>,
    /// When the last resolution was made.
    pub checked_at: Instant,
    /// Consecutive failures (0 after a success).
    pub failures: u32,
}

impl Memo {
    /// How long after `checked_at` the next resolution is due.
    pub(super) fn wait(&self, refresh: Duration, backoff: &Backoff) -> Duration {
        match self.outcome {
            Outcome::Current(_) => refresh,
            Outcome::Failed(_) => backoff.after(self.failures, refresh),
        }
    }

    /// Whether `request` must be resolved now rather than served from this memo.
    pub(super) fn stale_for(
        &self,
        request: &Request,
        refresh: Duration,
        backoff: &Backoff,
        now: Instant,
    ) -> bool {
        self.request != *request || due(self.checked_at, self.wait(refresh, backoff), now)
    }

    /// How long until the next resolution is due.
    pub(super) fn next_check(
        &self,
        refresh: Duration,
        backoff: &Backoff,
        now: Instant,
    ) -> Duration {
        remaining(self.checked_at, self.wait(refresh, backoff), now)
    }

    /// The memo after a resolution of `request` at `now` that ended with `result`.
    pub(super) fn after(
        previous: Option<&Memo>,
        request: Request,
        result: Result<Fetched, Failure>,
        now: Instant,
    ) -> Memo {
        // A different reference never serves the old one's artifact as last known good.
        let same_reference = previous.filter(|m| m.request.wanted == request.wanted);
        match result {
            Ok(fetched) => {
                let fetched = Arc::new(fetched);
                Memo {
                    request,
                    outcome: Outcome::Current(Arc::clone(&fetched)),
                    last_good: Some(fetched),
                    checked_at: now,
                    failures: 0,
                }
            }
            Err(failure) => Memo {
                request,
                outcome: Outcome::Failed(failure),
                last_good: same_reference.and_then(|m| m.last_good.clone()),
                checked_at: now,
                failures: same_reference.map_or(0, |m| m.failures).saturating_add(1),
            },
        }
    }
}

/// `spec.artifact.refreshInterval` when the policy gives none.
pub(super) const DEFAULT_REFRESH: Duration = Duration::from_secs(600);

/// How long to wait before retrying a failed resolution, and the cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure; doubled after each further one.
    pub first: Duration,
    /// The longest wait (never longer than the refresh interval either).
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The wait after `failures` consecutive failures (1 or more), capped by `refresh` too.
    pub fn after(&self, failures: u32, refresh: Duration) -> Duration {
        growing_delay(self.first, self.max, failures).min(refresh)
    }
}

/// Whether a resolution checked at `checked_at` must be redone at `now`: after `wait`.
fn due(checked_at: Instant, wait: Duration, now: Instant) -> bool {
    now.saturating_duration_since(checked_at) >= wait
}

/// How long until a check made at `checked_at` is due again.
fn remaining(checked_at: Instant, wait: Duration, now: Instant) -> Duration {
    wait.saturating_sub(now.saturating_duration_since(checked_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Reason;
    use crate::engine::{Artifact, Format};
    use crate::image_selection::controller::Wanted;
    use crate::image_selection::resolution::Platforms;
    use crate::image_selection::resolution::{Content, Resolved};

    fn request(reference: &str) -> Request {
        Request {
            wanted: Wanted::Reference(reference.into()),
            pull_secret: None,
            managed: false,
        }
    }

    fn fetched() -> Fetched {
        Fetched {
            resolved: Resolved {
                digest: "sha256:aaa".into(),
                format: Format::Ocifit,
                content: Content::Sets(
                    Artifact::parse(
                        Format::Ocifit,
                        br#"{"version":"v1alpha1","compatibilities":[{"tag":"a:v1","rules":[]}]}"#,
                    )
                    .unwrap(),
                ),
            },
            platforms: Platforms::new(),
        }
    }

    fn failure() -> Failure {
        Failure {
            reason: Reason::RegistryUnavailable,
            message: "connection refused".into(),
        }
    }

    const REFRESH: Duration = Duration::from_secs(60);

    #[test]
    fn a_success_is_served_until_the_refresh_interval_passes() {
        let t0 = Instant::now();
        let memo = Memo::after(None, request("r/a:v1"), Ok(fetched()), t0);
        let backoff = Backoff::default();
        assert!(!memo.stale_for(
            &request("r/a:v1"),
            REFRESH,
            &backoff,
            t0 + Duration::from_secs(59)
        ));
        assert!(memo.stale_for(&request("r/a:v1"), REFRESH, &backoff, t0 + REFRESH));
        assert_eq!(
            memo.next_check(REFRESH, &backoff, t0 + Duration::from_secs(20)),
            Duration::from_secs(40)
        );
    }

    #[test]
    fn a_changed_reference_or_secret_is_resolved_at_once() {
        let t0 = Instant::now();
        let memo = Memo::after(None, request("r/a:v1"), Ok(fetched()), t0);
        let backoff = Backoff::default();
        assert!(memo.stale_for(&request("r/a:v2"), REFRESH, &backoff, t0));
        let with_secret = Request {
            pull_secret: Some(crate::image_selection::controller::PullSecret {
                key: "ns/s@1".into(),
                docker_config_json: b"{}".to_vec(),
            }),
            ..request("r/a:v1")
        };
        assert!(memo.stale_for(&with_secret, REFRESH, &backoff, t0));
    }

    #[test]
    fn failures_keep_the_last_good_artifact_and_back_off() {
        let t0 = Instant::now();
        let backoff = Backoff::default();
        let good = Memo::after(None, request("r/a:v1"), Ok(fetched()), t0);
        let first = Memo::after(Some(&good), request("r/a:v1"), Err(failure()), t0);
        assert_eq!(first.failures, 1);
        assert!(first.last_good.is_some());
        assert_eq!(first.wait(REFRESH, &backoff), Duration::from_secs(1));
        let second = Memo::after(Some(&first), request("r/a:v1"), Err(failure()), t0);
        assert_eq!(second.failures, 2);
        assert_eq!(second.wait(REFRESH, &backoff), Duration::from_secs(2));
        let recovered = Memo::after(Some(&second), request("r/a:v1"), Ok(fetched()), t0);
        assert_eq!(recovered.failures, 0);
        assert!(matches!(recovered.outcome, Outcome::Current(_)));
    }

    #[test]
    fn a_new_reference_does_not_inherit_the_old_last_good_artifact() {
        let t0 = Instant::now();
        let good = Memo::after(None, request("r/a:v1"), Ok(fetched()), t0);
        let other = Memo::after(Some(&good), request("r/b:v1"), Err(failure()), t0);
        assert!(other.last_good.is_none());
        assert_eq!(other.failures, 1);
    }

    mod schedule {
        use super::*;

        #[test]
        fn backoff_doubles_up_to_its_cap_and_the_refresh_interval() {
            let backoff = Backoff::default();
            let hour = Duration::from_secs(3600);
            assert_eq!(backoff.after(1, hour), Duration::from_secs(1));
            assert_eq!(backoff.after(2, hour), Duration::from_secs(2));
            assert_eq!(backoff.after(4, hour), Duration::from_secs(8));
            assert_eq!(backoff.after(20, hour), Duration::from_secs(300));
            assert_eq!(backoff.after(u32::MAX, hour), Duration::from_secs(300));
            assert_eq!(
                backoff.after(10, Duration::from_secs(10)),
                Duration::from_secs(10)
            );
        }

        #[test]
        fn a_check_is_due_once_its_wait_has_passed() {
            let start = Instant::now();
            let wait = Duration::from_secs(10);
            assert!(!due(start, wait, start + Duration::from_secs(9)));
            assert!(due(start, wait, start + wait));
            assert_eq!(
                remaining(start, wait, start + Duration::from_secs(4)),
                Duration::from_secs(6)
            );
            assert_eq!(remaining(start, wait, start + hour_later()), Duration::ZERO);
        }

        fn hour_later() -> Duration {
            Duration::from_secs(3600)
        }
    }
}
