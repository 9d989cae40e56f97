//! Supervision of the long-lived tasks of `ocifit run`. Each runs until shutdown begins, then
//! finishes what it has in flight; a task that ends or panics before that is a failure: the
//! process is marked dead (liveness and readiness fail at once), shutdown begins for every other
//! task, and the failure, naming the task and why, is returned so the process exits non-zero.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::{Id, JoinError, JoinSet};

use crate::telemetry::Health;

/// How long tasks get to finish after shutdown begins before they are cut off (below the
/// kubelet's default 30 s termination grace period; the chart adds the webhook's shutdown
/// delay to both).
pub(super) const GRACE: Duration = Duration::from_secs(25);

/// How the supervised tasks ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shutdown was asked for, and the tasks finished.
    Stopped,
    /// A task ended on its own: which, and why.
    Failed {
        /// The task's name.
        task: &'static str,
        /// `ended`, or the panic message.
        why: String,
    },
}

/// Runs `tasks` until `signal` resolves or one of them ends; then begins shutdown through
/// `stop`, waits up to `grace` for the rest, and says how it ended.
pub(super) async fn supervise(
    tasks: Vec<(&'static str, BoxFuture<'static, ()>)>,
    stop: &watch::Sender<bool>,
    health: &Health,
    signal: impl Future<Output = ()>,
    grace: Duration,
) -> Ended {
    let mut running = JoinSet::new();
    let mut names: HashMap<Id, &'static str> = HashMap::new();
    for (name, task) in tasks {
        let handle = running.spawn(task);
        names.insert(handle.id(), name);
    }
    let ended = tokio::select! {
        () = signal => Ended::Stopped,
        Some(result) = running.join_next_with_id() => {
            let (id, why) = match result {
                Ok((id, ())) => (id, "ended".to_owned()),
                Err(err) => (err.id(), why(err)),
            };
            let task = names.remove(&id).unwrap_or("a task");
            health.set_dead();
            tracing::error!(task, why, "a task of ocifit run ended; stopping");
            Ended::Failed { task, why }
        }
    };
    health.set_ready(false);
    let _ = stop.send(true);
    let finished = tokio::time::timeout(grace, async {
        while let Some(result) = running.join_next_with_id().await {
            match result {
                Ok((id, ())) => {
                    names.remove(&id);
                }
                Err(err) => {
                    let task = names.remove(&err.id()).unwrap_or("a task");
                    tracing::warn!(task, why = why(err), "a task failed while stopping");
                }
            }
        }
    })
    .await;
    if finished.is_err() {
        let left: Vec<&str> = names.values().copied().collect();
        tracing::warn!(?grace, tasks = ?left, "tasks still running after the grace period; cut off");
        running.abort_all();
    }
    ended
}

/// Why a task did not finish: its panic message, or that it was cancelled.
fn why(err: JoinError) -> String {
    match err.try_into_panic() {
        Ok(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            format!("panicked: {message}")
        }
        Err(_) => "cancelled".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    /// A task that runs until shutdown begins.
    fn until_stopped(stop: &watch::Sender<bool>) -> BoxFuture<'static, ()> {
        let mut down = stop.subscribe();
        async move {
            let _ = down.wait_for(|down| *down).await;
        }
        .boxed()
    }

    #[tokio::test]
    async fn a_panicking_task_is_named_marks_the_process_dead_and_stops_the_others() {
        let (stop, _) = watch::channel(false);
        let health = Health::default();
        health.set_ready(true);
        let tasks = vec![
            ("node watch", until_stopped(&stop)),
            (
                "controller",
                async { panic!("the reconciler lost its store") }.boxed(),
            ),
        ];
        let ended = supervise(tasks, &stop, &health, std::future::pending(), GRACE).await;
        assert_eq!(
            ended,
            Ended::Failed {
                task: "controller",
                why: "panicked: the reconciler lost its store".to_owned()
            }
        );
        assert!(!health.live() && !health.ready());
        assert!(*stop.borrow(), "shutdown began for the others");
    }

    #[tokio::test]
    async fn a_task_that_ends_on_its_own_is_a_failure() {
        let (stop, _) = watch::channel(false);
        let health = Health::default();
        let tasks = vec![
            ("admission index feed", async {}.boxed()),
            ("controller", until_stopped(&stop)),
        ];
        let ended = supervise(tasks, &stop, &health, std::future::pending(), GRACE).await;
        assert_eq!(
            ended,
            Ended::Failed {
                task: "admission index feed",
                why: "ended".to_owned()
            }
        );
        assert!(!health.live());
    }

    #[tokio::test]
    async fn a_signal_stops_every_task_and_the_process_stays_live() {
        let (stop, _) = watch::channel(false);
        let health = Health::default();
        health.set_ready(true);
        let tasks = vec![
            ("controller", until_stopped(&stop)),
            ("admission server", until_stopped(&stop)),
        ];
        let ended = supervise(tasks, &stop, &health, async {}, GRACE).await;
        assert_eq!(ended, Ended::Stopped);
        assert!(health.live());
        assert!(!health.ready(), "not ready while stopping");
    }

    #[tokio::test]
    async fn a_task_that_ignores_shutdown_is_cut_off_after_the_grace_period() {
        let (stop, _) = watch::channel(false);
        let health = Health::default();
        let tasks = vec![("stuck", std::future::pending().boxed())];
        let ended = supervise(tasks, &stop, &health, async {}, Duration::from_millis(50)).await;
        assert_eq!(ended, Ended::Stopped);
    }
}
