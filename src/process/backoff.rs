//! The one growing-delay schedule of the process, [`growing_delay`]: the registry's retries and
//! cool-off, a policy's artifact retries, placement's inspections and every watch read it. Ours
//! rather than `backon`'s: most callers keep only a failure count and need the n-th wait as a
//! pure answer, which `backon`'s stateful iterator gives only by replaying n steps. The watches'
//! schedule is kube's default with a lower cap, so a replica's stores are current again soon
//! after an apiserver's return (the fault suite expects it).

use std::time::Duration;

use kube::runtime::utils::{Backoff, ResetTimerBackoff};

/// The wait before a failed watch's first retry.
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(800);
/// The longest wait before jitter; jitter adds up to as much again.
pub(super) const LONGEST_RETRY: Duration = Duration::from_secs(2);
/// How long a watch must go without failing for its backoff to start over.
pub(super) const RESET_AFTER: Duration = Duration::from_secs(120);

/// The wait after `failures` consecutive failures (1 for the first): `first`, doubled after each
/// further failure, never longer than `longest`.
pub fn growing_delay(first: Duration, longest: Duration, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    first.saturating_mul(1 << doublings).min(longest)
}

/// The backoff every watch of the process uses (`watcher(..).backoff(watch_backoff())`).
pub fn watch_backoff() -> ResetTimerBackoff<WatchBackoff> {
    ResetTimerBackoff::new(WatchBackoff::default(), RESET_AFTER)
}

/// A watch's waits: [`growing_delay`] from [`FIRST_RETRY`] to [`LONGEST_RETRY`], each plus up to
/// as much again at random, so replicas that lost the same apiserver do not return in step.
#[derive(Debug, Default)]
pub struct WatchBackoff {
    failures: u32,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        let wait = growing_delay(FIRST_RETRY, LONGEST_RETRY, self.failures);
        // Without a random number the wait is only not spread: still a wait.
        Some(jittered(wait, getrandom::u32().unwrap_or(0)))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// `wait` plus the share `random / 2^32` of it again.
fn jittered(wait: Duration, random: u32) -> Duration {
    wait + wait.mul_f64(f64::from(random) / 4_294_967_296.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/operations.md states the schedule; the figures here are the ones it states.
    const DOCUMENTED: &str = "retried after 0.8 s, 1.6 s, then every 2 s, each wait plus up to as \
        much again at random, and start over after 2 minutes without a failure";

    #[test]
    fn the_delay_doubles_from_the_first_and_stops_at_the_longest() {
        let (first, longest) = (Duration::from_secs(1), Duration::from_secs(300));
        let waits: Vec<u64> = [1, 2, 3, 4, 9, 10]
            .map(|n| growing_delay(first, longest, n).as_secs())
            .into();
        assert_eq!(waits, [1, 2, 4, 8, 256, 300]);
        // A count of 0 is read as the first failure; a huge one neither overflows nor passes the cap.
        assert_eq!(growing_delay(first, longest, 0), first);
        assert_eq!(growing_delay(first, longest, u32::MAX), longest);
        assert_eq!(
            growing_delay(first, Duration::MAX, u32::MAX),
            first * (1 << 31)
        );
    }

    #[test]
    fn jitter_adds_at_most_as_much_again() {
        let wait = Duration::from_secs(2);
        assert_eq!(jittered(wait, 0), wait);
        assert_eq!(jittered(wait, 1 << 31), Duration::from_secs(3));
        assert!(jittered(wait, u32::MAX) <= 2 * wait);
    }

    #[test]
    fn watches_retry_after_the_documented_waits_and_start_over_on_reset() {
        let bases = [0.8, 1.6, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        let within = |waits: &[f64]| {
            for (wait, base) in waits.iter().zip(bases) {
                assert!(
                    (base - 1e-6..2.0 * base + 1e-6).contains(wait),
                    "{waits:?} against {bases:?}"
                );
            }
        };
        let mut backoff = WatchBackoff::default();
        for _ in 0..20 {
            let waits: Vec<f64> = backoff
                .by_ref()
                .take(bases.len())
                .map(|wait| wait.as_secs_f64())
                .collect();
            within(&waits);
            backoff.reset();
        }
        assert_eq!(RESET_AFTER, Duration::from_secs(2 * 60));
        let operations = include_str!("../../docs/operations.md").replace('\n', " ");
        let operations = operations.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            operations.contains(DOCUMENTED),
            "docs/operations.md no longer says: {DOCUMENTED}"
        );
    }
}
