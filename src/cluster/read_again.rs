//! One more read from the apiserver for admission, when a reflected store may lag it: an object
//! created (or made Ready) just before the request that needs it reaches the apiserver's
//! admission before this replica's watch. Taken only on the admission host's blocking pool,
//! within [`READ_WITHIN`]; a read that fails, is late, or that the process's one [`Budget`]
//! refuses is `None`, and the planner decides on what its store holds. The budget is what
//! anyone who reaches the webhook port can make admission read: a key not found missing within
//! [`FORGET_AFTER`], a token from one bucket ([`RATE`] a second, [`BURST`] at once), fewer than
//! [`MAX_READING`] reads waiting; so reviews naming absent objects cost a few reads a second.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::Client;

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

/// Reads a second the bucket refills with: a real review needs a read only for a namespace
/// created a moment before its first pod, or a step whose cache became Ready a moment before.
const RATE: f64 = 5.0;
/// Reads the bucket holds (a burst of new namespaces).
const BURST: f64 = 10.0;
/// How long a key read and not found is not read again.
const FORGET_AFTER: Duration = Duration::from_secs(10);
/// Reads waiting on the apiserver at once, over every route: each holds a blocking thread.
const MAX_READING: usize = 2;

/// The shared budget (one per process: [`ReadAgain::from_apiserver`] takes from it).
#[derive(Debug)]
pub struct Budget {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    refilled: Instant,
    /// Keys read and not found, until when they are not read again. At most
    /// `BURST + RATE × FORGET_AFTER` live entries: each follows a read the bucket allowed.
    missing: HashMap<String, Instant>,
    reading: usize,
}

/// Why a read was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// The key was read and not found within [`FORGET_AFTER`].
    KnownMissing,
    /// The bucket is empty.
    NoToken,
    /// [`MAX_READING`] reads are waiting already.
    Busy,
}

/// A read the budget allowed: ends with [`Reading::found`] or [`Reading::missing`]; dropped
/// without either (a panic) it frees its place only.
#[derive(Debug)]
pub struct Reading {
    budget: Arc<Budget>,
    key: String,
}

impl Budget {
    /// A full bucket at `now`, nothing known missing.
    pub fn new(now: Instant) -> Arc<Budget> {
        Arc::new(Budget {
            state: Mutex::new(State {
                tokens: BURST,
                refilled: now,
                missing: HashMap::new(),
                reading: 0,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update below is whole before it can panic: a poisoned state is consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A read of `key` at `now`, or why not.
    pub fn take(self: &Arc<Self>, key: &str, now: Instant) -> Result<Reading, Skipped> {
        let mut state = self.state();
        if state.missing.get(key).is_some_and(|until| *until > now) {
            return Err(Skipped::KnownMissing);
        }
        if state.reading >= MAX_READING {
            return Err(Skipped::Busy);
        }
        let elapsed = now.saturating_duration_since(state.refilled).as_secs_f64();
        state.tokens = (state.tokens + elapsed * RATE).min(BURST);
        state.refilled = state.refilled.max(now);
        if state.tokens < 1.0 {
            return Err(Skipped::NoToken);
        }
        state.tokens -= 1.0;
        state.reading += 1;
        Ok(Reading {
            budget: Arc::clone(self),
            key: key.to_owned(),
        })
    }
}

impl Reading {
    /// The key was found: read it whenever asked.
    pub fn found(self) {
        self.budget.state().missing.remove(&self.key);
    }

    /// The key was not found, or not read in time, at `now`: not read again for
    /// [`FORGET_AFTER`].
    pub fn missing(self, now: Instant) {
        let mut state = self.budget.state();
        state.missing.retain(|_, until| *until > now);
        state.missing.insert(self.key.clone(), now + FORGET_AFTER);
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.budget.state().reading -= 1;
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
        let allowed = BURST + RATE * started.elapsed().as_secs_f64() + 1.0;
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

    /// A flood naming one unknown key costs one read per [`FORGET_AFTER`].
    #[test]
    fn a_key_found_missing_is_not_read_again_until_forgotten() {
        let start = Instant::now();
        let budget = Budget::new(start);
        budget.take("ghost", start).unwrap().missing(start);
        for step in 0..100 {
            let now = start + Duration::from_millis(step * 50);
            assert_eq!(
                budget.take("ghost", now).unwrap_err(),
                Skipped::KnownMissing
            );
        }
        let later = start + FORGET_AFTER + Duration::from_millis(1);
        assert!(budget.take("ghost", later).is_ok());
    }

    /// Distinct unknown keys (one each, as a forger would send) cost at most the bucket: a
    /// burst, then [`RATE`] a second.
    #[test]
    fn distinct_keys_share_one_bucket() {
        let start = Instant::now();
        let budget = Budget::new(start);
        let mut read = 0;
        for i in 0..1000 {
            // 1,000 reviews over 10 s, each naming a new key.
            let now = start + Duration::from_millis(i * 10);
            if let Ok(reading) = budget.take(&format!("ns-{i}"), now) {
                read += 1;
                reading.missing(now);
            }
        }
        let allowed = BURST + RATE * 10.0;
        assert!(f64::from(read) <= allowed, "{read} reads, over {allowed}");
        assert!(read >= 50, "{read}");
    }

    /// Reads waiting on a slow apiserver are capped; the others are skipped at once, never
    /// queued.
    #[test]
    fn reads_waiting_at_once_are_capped() {
        let now = Instant::now();
        let budget = Budget::new(now);
        let waiting: Vec<Reading> = (0..MAX_READING)
            .map(|i| budget.take(&format!("slow-{i}"), now).unwrap())
            .collect();
        assert_eq!(budget.take("another", now).unwrap_err(), Skipped::Busy);
        drop(waiting);
        assert!(budget.take("another", now).is_ok());
    }

    /// A key found is read whenever asked (within the bucket): a real namespace is never
    /// taken for missing.
    #[test]
    fn a_key_found_stays_readable() {
        let now = Instant::now();
        let budget = Budget::new(now);
        budget.take("real", now).unwrap().found();
        assert!(budget.take("real", now).is_ok());
    }
}
