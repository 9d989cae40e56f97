//! The registry client's caches (moka). Content by digest is immutable: kept long, bounded by
//! bytes. A tag's digest and an image's referrers live briefly; "not found" even more briefly;
//! errors are never cached. Concurrent lookups of one key share one load, and the load runs in
//! its own task so a caller that gives up cannot stall the others or make them start over.

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
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            tag_ttl: Duration::from_secs(60),
            not_found_ttl: Duration::from_secs(5),
            content_capacity_bytes: 64 * 1024 * 1024,
            content_idle: Duration::from_secs(24 * 3600),
        }
    }
}

/// (API host, repository, tag or digest): content is scoped to its repository, as access is.
pub(crate) type Key = (String, String, String);

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
        let inflight = Arc::clone(&self.inflight);
        let task = tokio::spawn(async move {
            let result = load.await;
            if let Ok(value) = &result {
                cache.insert(key.clone(), value.clone()).await;
            }
            // Cached before it stops being in flight, so no caller can miss both.
            lock(&inflight).remove(&key);
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map stays consistent even if a holder panicked: every update is one insert or remove.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
