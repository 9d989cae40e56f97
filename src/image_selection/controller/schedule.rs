//! When a policy's artifact is looked at again: the refresh interval after a success, a growing
//! backoff after a failure. Pure: time is passed in as `Instant`s.

use std::time::{Duration, Instant};

use crate::process::growing_delay;

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
pub(super) fn due(checked_at: Instant, wait: Duration, now: Instant) -> bool {
    now.saturating_duration_since(checked_at) >= wait
}

/// How long until a check made at `checked_at` is due again.
pub(super) fn remaining(checked_at: Instant, wait: Duration, now: Instant) -> Duration {
    wait.saturating_sub(now.saturating_duration_since(checked_at))
}

#[cfg(test)]
mod tests {
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
