//! The registry client's caches (moka), one set shared by every client made from one root with
//! [`Registry::with_credentials`](super::Registry::with_credentials), each entry scoped by the
//! credentials it was read with. Content by digest is immutable: kept long, bounded by bytes. A
//! tag's digest and an image's referrers live briefly; "not found" even more briefly; errors are
//! never cached. The platforms last read for an image are kept for outages. Concurrent lookups of
//! one key share one load, and the load runs in its own task so a caller that gives up cannot
//! stall the others or make them start over.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, Shared};
use moka::Expiry;
use moka::future::Cache;

use super::error::{Error, Target};
use super::manifest::Descriptor;
use super::platforms::ImagePlatforms;

/// How long things are remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheOptions {
    /// How long a tag's digest (and an image's referrers list) is trusted.
    pub tag_ttl: Duration,
    /// How long "no such tag" (or "no referrers") is remembered.
    pub not_found_ttl: Duration,
    /// Most bytes of manifests and blobs kept.
    pub content_capacity_bytes: u64,
    /// Content unused this long is dropped.
    pub content_idle: Duration,
    /// Most images whose last read platforms are kept for outages.
    pub known_platforms_capacity: u64,
    /// The last read platforms of an image not asked for this long are dropped.
    pub known_platforms_idle: Duration,
    /// Most clients kept for named credentials (pull Secrets); the least recently used goes.
    pub clients_capacity: usize,
    /// A named client not asked for this long is dropped (its Secret or policy is gone, or the
    /// policy is idle: rebuilding it costs a token request, as content stays cached).
    pub clients_idle: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            tag_ttl: Duration::from_secs(60),
            not_found_ttl: Duration::from_secs(5),
            content_capacity_bytes: 64 * 1024 * 1024,
            content_idle: Duration::from_secs(24 * 3600),
            known_platforms_capacity: 10_000,
            known_platforms_idle: Duration::from_secs(24 * 3600),
            clients_capacity: 1024,
            clients_idle: Duration::from_secs(3600),
        }
    }
}

/// (credentials scope, API host, repository, tag or digest): content is scoped to its repository
/// and to the credentials it was read with, as access is, so a client never gets from the cache
/// what its own credentials could not read.
pub(crate) type Key = (u128, String, String, String);

/// Verified content with the media type the registry gave it.
#[derive(Debug, Clone)]
pub(crate) struct Content {
    pub body: Bytes,
    pub content_type: Option<String>,
}

/// What a tag resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TagEntry {
    Digest(String),
    Missing,
}

pub(crate) struct Caches {
    pub content: Coalescing<Content>,
    pub tags: Coalescing<TagEntry>,
    pub referrers: Coalescing<Arc<Vec<Descriptor>>>,
    /// The platforms last read for an image (by tag or digest), served during outages.
    pub known_platforms: Cache<Key, ImagePlatforms>,
}

/// Expiry by what was found: a hit lives `found`, a miss lives `missing`.
struct ByPresence {
    found: Duration,
    missing: Duration,
}

impl Expiry<Key, TagEntry> for ByPresence {
    fn expire_after_create(&self, _: &Key, value: &TagEntry, _: Instant) -> Option<Duration> {
        Some(match value {
            TagEntry::Digest(_) => self.found,
            TagEntry::Missing => self.missing,
        })
    }
}

impl Expiry<Key, Arc<Vec<Descriptor>>> for ByPresence {
    fn expire_after_create(
        &self,
        _: &Key,
        value: &Arc<Vec<Descriptor>>,
        _: Instant,
    ) -> Option<Duration> {
        Some(if value.is_empty() {
            self.missing
        } else {
            self.found
        })
    }
}

impl Caches {
    pub(crate) fn new(options: &CacheOptions) -> Self {
        let by_presence = || ByPresence {
            found: options.tag_ttl,
            missing: options.not_found_ttl,
        };
        Caches {
            content: Coalescing::new(
                Cache::builder()
                    .weigher(|_: &Key, value: &Content| {
                        u32::try_from(value.body.len()).unwrap_or(u32::MAX)
                    })
                    .max_capacity(options.content_capacity_bytes)
                    .time_to_idle(options.content_idle)
                    .build(),
            ),
            tags: Coalescing::new(
                Cache::builder()
                    .max_capacity(10_000)
                    .expire_after(by_presence())
                    .build(),
            ),
            referrers: Coalescing::new(
                Cache::builder()
                    .max_capacity(10_000)
                    .expire_after(by_presence())
                    .build(),
            ),
            known_platforms: Cache::builder()
                .max_capacity(options.known_platforms_capacity)
                .time_to_idle(options.known_platforms_idle)
                .build(),
        }
    }
}

type SharedLoad<V> = Shared<BoxFuture<'static, Result<V, Error>>>;

/// A moka cache whose loads are shared: concurrent lookups of one key make one registry request,
/// and the load runs in its own task, so a caller that gives up neither stalls the others nor
/// makes them start the request again.
pub(crate) struct Coalescing<V> {
    pub cache: Cache<Key, V>,
    inflight: Arc<Mutex<HashMap<Key, SharedLoad<V>>>>,
}

impl<V: Clone + Send + Sync + 'static> Coalescing<V> {
    pub(crate) fn new(cache: Cache<Key, V>) -> Self {
        Coalescing {
            cache,
            inflight: Arc::default(),
        }
    }

    /// Gets `key`, loading it with `load` on a miss. A failed load is not cached.
    pub(crate) async fn get_or_load<F>(
        &self,
        key: Key,
        counters: (&AtomicU64, &AtomicU64),
        target: &Target,
        load: F,
    ) -> Result<V, Error>
    where
        F: Future<Output = Result<V, Error>> + Send + 'static,
    {
        let (hits, misses) = counters;
        if let Some(value) = self.cache.get(&key).await {
            hits.fetch_add(1, Ordering::Relaxed);
            return Ok(value);
        }
        let shared = {
            let mut inflight = lock(&self.inflight);
            match inflight.get(&key) {
                Some(running) => {
                    hits.fetch_add(1, Ordering::Relaxed);
                    running.clone()
                }
                None => {
                    misses.fetch_add(1, Ordering::Relaxed);
                    let shared = self.spawn(key.clone(), target.clone(), load);
                    inflight.insert(key, shared.clone());
                    shared
                }
            }
        };
        shared.await
    }

    fn spawn<F>(&self, key: Key, target: Target, load: F) -> SharedLoad<V>
    where
        F: Future<Output = Result<V, Error>> + Send + 'static,
    {
        let cache = self.cache.clone();
        let done = Done {
            inflight: Arc::clone(&self.inflight),
            key: key.clone(),
        };
        let task = tokio::spawn(async move {
            let result = load.await;
            if let Ok(value) = &result {
                cache.insert(key, value.clone()).await;
            }
            // Cached before it stops being in flight, so no caller can miss both.
            drop(done);
            result
        });
        async move {
            task.await.unwrap_or_else(|_| {
                Err(Error::Transport {
                    target,
                    detail: "the registry request task failed".into(),
                    source: None,
                })
            })
        }
        .boxed()
        .shared()
    }
}

/// Ends a load's time in flight when dropped: after it cached its value, and also when it
/// panicked, so a failed load never leaves its key waiting on it for ever.
struct Done<V> {
    inflight: Arc<Mutex<HashMap<Key, SharedLoad<V>>>>,
    key: Key,
}

impl<V> Drop for Done<V> {
    fn drop(&mut self) {
        lock(&self.inflight).remove(&self.key);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map stays consistent even if a holder panicked: every update is one insert or remove.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        (0, "r.example.com".into(), "acme/app".into(), "v1".into())
    }

    fn target() -> Target {
        Target {
            registry: "r.example.com".into(),
            repository: "acme/app".into(),
            reference: "v1".into(),
        }
    }

    #[tokio::test]
    async fn a_load_that_panics_fails_its_callers_and_the_next_lookup_loads_again() {
        let coalescing: Coalescing<u32> = Coalescing::new(Cache::builder().build());
        let (hits, misses) = (AtomicU64::new(0), AtomicU64::new(0));
        async fn explode() -> Result<u32, Error> {
            panic!("a load that panics")
        }
        let err = coalescing
            .get_or_load(key(), (&hits, &misses), &target(), explode())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("task failed"), "{err}");
        let value = coalescing
            .get_or_load(key(), (&hits, &misses), &target(), async { Ok(7) })
            .await
            .unwrap();
        assert_eq!(value, 7);
        assert_eq!(misses.load(Ordering::Relaxed), 2);
    }
}
