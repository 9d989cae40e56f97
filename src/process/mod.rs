//! What every long-lived part of `ocifit run` is made of, below the rooms that make them: named
//! [`Tasks`], the one [`Shutdown`] signal, [`until`] for tasks with nothing to finish, and the
//! [`Feature`] face every feature's `run` returns (its tasks, its admission routes, its
//! [`Readiness`]). The cluster view, the admission host and `startup` all speak it, so none
//! rewrites another's shutdown wait or task list. Every retry waits by the one [`growing_delay`],
//! every watch on [`watch_backoff`] over it.

mod backoff;

use std::future::Future;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, join_all};
use tokio::sync::watch;

pub use backoff::growing_delay;

pub use backoff::watch_backoff;

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
}
