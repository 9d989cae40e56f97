//! The one backoff of every watch the process keeps (the cluster view's, each feature's, the
//! leader Lease's, the certificate Secret's): as kube's default (client-go's: from 0.8 s,
//! doubling, with jitter, starting over after 2 minutes of health) but at most 2 s before jitter
//! instead of 30, so what a replica holds is current again within seconds of an apiserver's
//! return (the fault suite restarts one and expects status within 10 s).

use std::time::Duration;

use backon::ExponentialBuilder;
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::ExponentialBackoff;

/// The wait before a failed watch's first retry.
pub const FIRST_RETRY: Duration = Duration::from_millis(800);
/// The longest wait before jitter; jitter adds up to as much again.
pub const LONGEST_RETRY: Duration = Duration::from_secs(2);
/// How long a watch must go without failing for its backoff to start over.
pub const RESET_AFTER: Duration = Duration::from_secs(120);

/// The backoff every watch of the process uses (`watcher(..).backoff(watch_backoff())`).
pub fn watch_backoff() -> ResetTimerBackoff<ExponentialBackoff> {
    ResetTimerBackoff::new(schedule().into(), RESET_AFTER)
}

/// The waits before jitter and reset: first, doubling, capped; jitter adds up to as much again.
fn schedule() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(FIRST_RETRY)
        .with_max_delay(LONGEST_RETRY)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
}

#[cfg(test)]
mod tests {
    use backon::BackoffBuilder;

    use super::*;

    /// docs/operations.md states the schedule; the figures here are the ones it states.
    const DOCUMENTED: &str = "retried after 0.8 s, 1.6 s, then every 2 s, each wait plus up to as \
        much again at random, and start over after 2 minutes without a failure";

    #[test]
    fn watches_retry_after_the_documented_waits() {
        let bases = [0.8, 1.6, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        for _ in 0..20 {
            let waits: Vec<f64> = schedule()
                .build()
                .take(bases.len())
                .map(|wait| wait.as_secs_f64())
                .collect();
            for (wait, base) in waits.iter().zip(bases) {
                assert!(
                    (base - 1e-6..2.0 * base + 1e-6).contains(wait),
                    "{waits:?} against {bases:?}"
                );
            }
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
