//! What every long-lived part of `ocifit run` is made of, below the rooms that make them: named
//! [`Tasks`], the one [`Shutdown`] signal, [`until`] for tasks with nothing to finish, and the
//! [`Feature`] face every feature's `run` returns (its tasks, its admission routes, its
//! [`Readiness`]). The cluster view, the admission host and `startup` all speak it, so none
//! rewrites another's shutdown wait or task list. Every retry waits by the one [`growing_delay`],
//! every watch on [`watch_backoff`] over it: ours rather than `backon`'s, because most callers
//! keep only a failure count and need the n-th wait as a pure answer.

use std::future::Future;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, join_all};
use kube::runtime::utils::{Backoff, ResetTimerBackoff};
use tokio::sync::watch;

/// Long-lived tasks by name, for the supervisor. Each ends once shutdown begins (after
/// finishing what it has in flight); any other end is a failure.
pub type Tasks = Vec<(&'static str, BoxFuture<'static, ()>)>;

/// The one shutdown signal of the process, as every task sees it. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// A signal and the sender that starts it (`send(true)`).
    pub fn new() -> (watch::Sender<bool>, Shutdown) {
        let (sender, receiver) = watch::channel(false);
        (sender, Shutdown(receiver))
    }

    /// Resolves once shutdown has begun (or its sender is gone).
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|down| *down).await;
    }
}

/// `task`, ended when `shutdown` begins (for tasks with nothing to finish).
pub fn until(
    shutdown: Shutdown,
    task: impl Future<Output = ()> + Send + 'static,
) -> BoxFuture<'static, ()> {
    async move {
        tokio::select! {
            () = task => {}
            () = shutdown.wait() => {}
        }
    }
    .boxed()
}

/// One feature, running: what `startup` adds to the process. `R` is the admission host's route
/// (named by the features, which sit above the host).
pub struct Feature<R> {
    /// Its long-lived tasks, by name (the names the logs show).
    pub tasks: Tasks,
    /// Its admission routes; the host is served when any feature has one.
    pub routes: Vec<R>,
    /// When it can serve.
    pub readiness: Readiness,
}

/// When a part of the process can serve: a first moment (its stores hold a first list) and a
/// test that holds from then on while it can.
pub struct Readiness {
    synced: BoxFuture<'static, ()>,
    ready: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Readiness {
    /// Synced once `synced` resolves; ready while `ready` holds.
    pub fn new(
        synced: impl Future<Output = ()> + Send + 'static,
        ready: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Readiness {
        Readiness {
            synced: synced.boxed(),
            ready: Box::new(ready),
        }
    }

    /// Every one of `parts`: synced once each is, ready while each is.
    pub fn all(parts: impl IntoIterator<Item = Readiness>) -> Readiness {
        let (synced, ready): (Vec<_>, Vec<_>) =
            parts.into_iter().map(|r| (r.synced, r.ready)).unzip();
        Readiness {
            synced: join_all(synced).map(|_| ()).boxed(),
            ready: Box::new(move || ready.iter().all(|ready| ready())),
        }
    }

    /// Whether it can serve now.
    pub fn ready(&self) -> bool {
        (self.ready)()
    }

    /// The first moment and the test, apart (one is awaited, the other looked at).
    pub fn into_parts(self) -> (BoxFuture<'static, ()>, Box<dyn Fn() -> bool + Send + Sync>) {
        (self.synced, self.ready)
    }
}

/// The wait before a failed watch's first retry.
const FIRST_RETRY: Duration = Duration::from_millis(800);
/// The longest wait before jitter; jitter adds up to as much again.
const LONGEST_RETRY: Duration = Duration::from_secs(2);
/// How long a watch must go without failing for its backoff to start over.
const RESET_AFTER: Duration = Duration::from_secs(120);

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

/// A watch's waits: [`growing_delay`] from `FIRST_RETRY` to `LONGEST_RETRY`, each plus up to
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
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test]
    async fn all_parts_are_synced_only_once_each_is_and_ready_only_while_each_is() {
        let (first_sent, first) = tokio::sync::oneshot::channel::<()>();
        let open = Arc::new(AtomicBool::new(true));
        let gate = Arc::clone(&open);
        let all = Readiness::all([
            Readiness::new(
                async {
                    let _ = first.await;
                },
                || true,
            ),
            Readiness::new(async {}, move || gate.load(Ordering::SeqCst)),
        ]);
        assert!(all.ready());
        open.store(false, Ordering::SeqCst);
        assert!(!all.ready(), "one part not ready: the whole is not");
        let (mut synced, _) = all.into_parts();
        assert!(
            (&mut synced).now_or_never().is_none(),
            "one part not synced: the whole is not"
        );
        let _ = first_sent.send(());
        assert!(synced.now_or_never().is_some());
    }

    #[tokio::test]
    async fn until_ends_a_task_when_shutdown_begins() {
        let (stop, shutdown) = Shutdown::new();
        let mut task = until(shutdown, std::future::pending());
        assert!((&mut task).now_or_never().is_none());
        let _ = stop.send(true);
        assert!(task.now_or_never().is_some());
    }

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
