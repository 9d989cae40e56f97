//! One more read from the apiserver for admission, when a reflected store may lag it: an object
//! created (or made Ready) just before the request that needs it reaches the apiserver's
//! admission before this replica's watch. Taken only on the admission host's blocking pool,
//! within [`READ_WITHIN`]; a read that fails, is late, or that the process's one
//! [`budget::Budget`] refuses is `None`, and the planner decides on what its store holds. So
//! reviews naming objects that do not exist cost the apiserver a few reads a second.

mod budget;

use std::fmt;
use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use kube::Client;

use budget::Budget;

/// The process's budget for admission's reads.
static BUDGET: LazyLock<Arc<Budget>> = LazyLock::new(|| Budget::new(Instant::now()));

/// How long admission waits for one read again.
pub(super) const READ_WITHIN: Duration = Duration::from_millis(500);

/// Reads what key `K` names (a namespace's name, an object reference) afresh as a `T`: `None`
/// when it is not there or cannot be read within `READ_WITHIN`. Blocks its thread: call it
/// on the blocking pool only.
pub struct ReadAgain<K: ?Sized, T>(Arc<Read<K, T>>);

/// The read behind [`ReadAgain`].
type Read<K, T> = dyn Fn(&K) -> Option<T> + Send + Sync;

impl<K: ?Sized + 'static, T: 'static> ReadAgain<K, T> {
    /// The read `read` (tests give one that answers from memory).
    pub fn new(read: impl Fn(&K) -> Option<T> + Send + Sync + 'static) -> Self {
        ReadAgain(Arc::new(read))
    }

    /// What `key` names, read again.
    pub fn read(&self, key: &K) -> Option<T> {
        (self.0)(key)
    }
}

impl<K: ?Sized + fmt::Display + 'static, T: 'static> ReadAgain<K, T> {
    /// `read` taken within `budget`: a key is read only when the budget allows it, and one not
    /// found (`None`) is not read again until the budget forgets it.
    pub fn within(
        budget: Arc<Budget>,
        read: impl Fn(&K) -> Option<T> + Send + Sync + 'static,
    ) -> Self {
        ReadAgain::new(move |key: &K| {
            let name = key.to_string();
            let reading = match budget.take(&name, Instant::now()) {
                Ok(reading) => reading,
                Err(skipped) => {
                    tracing::debug!(key = %name, ?skipped, "not read again for admission");
                    return None;
                }
            };
            let found = read(key);
            match found {
                Some(_) => reading.found(),
                None => reading.missing(Instant::now()),
            }
            found
        })
    }
}

impl<K: ?Sized + fmt::Display + 'static, T: 'static> ReadAgain<K, T> {
    /// A read from the apiserver with `client`, on the current Tokio runtime, within the
    /// process's `Budget`; `None` outside one. `read` starts the request for a key (`Ok(None)`: not there); a failed or late one is
    /// logged at debug level, naming the key.
    pub fn from_apiserver<F, R>(client: &Client, read: F) -> Option<Self>
    where
        F: Fn(Client, &K) -> R + Send + Sync + 'static,
        R: Future<Output = Result<Option<T>, kube::Error>>,
    {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let client = client.clone();
        Some(ReadAgain::within(Arc::clone(&BUDGET), move |key: &K| {
            // On the blocking pool, where waiting on the runtime is allowed.
            match runtime.block_on(tokio::time::timeout(READ_WITHIN, read(client.clone(), key))) {
                Ok(Ok(found)) => found,
                Ok(Err(error)) => {
                    tracing::debug!(%key, %error, "not read again for admission");
                    None
                }
                Err(_) => {
                    tracing::debug!(%key, within = ?READ_WITHIN, "not read again for admission in time");
                    None
                }
            }
        }))
    }
}

impl<K: ?Sized, T> Clone for ReadAgain<K, T> {
    fn clone(&self) -> Self {
        ReadAgain(Arc::clone(&self.0))
    }
}

impl<K: ?Sized, T> fmt::Debug for ReadAgain<K, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReadAgain")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that never answers stops waiting at [`READ_WITHIN`] and is `None`: the planner
    /// then decides on its store, inside the request's deadline.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_read_the_apiserver_does_not_answer_in_time_is_none() {
        let client =
            Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let read = ReadAgain::<str, String>::from_apiserver(&client, |_, _| {
            std::future::pending::<Result<Option<String>, kube::Error>>()
        })
        .unwrap();
        let answered = tokio::task::spawn_blocking(move || read.read("late"))
            .await
            .unwrap();
        assert_eq!(answered, None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_read_that_fails_is_none_and_one_that_finds_is_its_answer() {
        let client =
            Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let fails = ReadAgain::<str, String>::from_apiserver(&client, |client, name: &str| {
            let name = name.to_owned();
            async move {
                let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
                    kube::Api::all(client);
                namespaces.get_opt(&name).await.map(|_| Some(name))
            }
        })
        .unwrap();
        let finds = ReadAgain::<str, String>::from_apiserver(&client, |_, name: &str| {
            std::future::ready(Ok(Some(name.to_uppercase())))
        })
        .unwrap();
        let (failed, found) =
            tokio::task::spawn_blocking(move || (fails.read("fails"), finds.read("finds")))
                .await
                .unwrap();
        assert_eq!(failed, None);
        assert_eq!(found.as_deref(), Some("FINDS"));
    }

    /// Forged reviews naming namespaces that do not exist, 1,000 within a second, a tenth of
    /// them naming the same one: the apiserver is read at most a bucket's worth, once per
    /// name, and every read skipped answers at once.
    #[test]
    fn a_flood_of_unknown_keys_costs_at_most_the_budget() {
        let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&reads);
        let read = ReadAgain::<str, String>::within(Budget::new(Instant::now()), move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            None
        });
        let started = Instant::now();
        for i in 0..1000 {
            let name = if i % 10 == 0 {
                "ghost".to_owned()
            } else {
                format!("ghost-{i}")
            };
            assert_eq!(read.read(&name), None);
        }
        let reads = reads.load(std::sync::atomic::Ordering::SeqCst);
        let allowed = budget::BURST + budget::RATE * started.elapsed().as_secs_f64() + 1.0;
        assert!((reads as f64) <= allowed, "{reads} reads, over {allowed}");
    }

    #[test]
    fn outside_a_runtime_there_is_no_read() {
        let client = tokio::runtime::Runtime::new().unwrap().block_on(async {
            Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap()
        });
        let read =
            ReadAgain::<str, String>::from_apiserver(&client, |_, _| std::future::ready(Ok(None)));
        assert!(read.is_none());
    }
}
