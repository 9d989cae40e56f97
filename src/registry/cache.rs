//! The registry client's caches (moka). Content by digest is immutable: kept long, bounded by
//! bytes. A tag's digest and an image's referrers live briefly; "not found" even more briefly;
//! errors are never cached. Concurrent lookups of one key share one load, and the load runs in
//! its own task so a caller that gives up cannot stall the others.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
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
    pub content: Cache<Key, Content>,
    pub tags: Cache<Key, TagEntry>,
    pub referrers: Cache<Key, Arc<Vec<Descriptor>>>,
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
            content: Cache::builder()
                .weigher(|_: &Key, value: &Content| {
                    u32::try_from(value.body.len()).unwrap_or(u32::MAX)
                })
                .max_capacity(options.content_capacity_bytes)
                .time_to_idle(options.content_idle)
                .build(),
            tags: Cache::builder()
                .max_capacity(10_000)
                .expire_after(by_presence())
                .build(),
            referrers: Cache::builder()
                .max_capacity(10_000)
                .expire_after(by_presence())
                .build(),
        }
    }
}

/// Gets `key` from `cache`, loading it with `load` on a miss. Concurrent callers for one key
/// share one load; a failed load is not cached.
pub(crate) async fn get_or_load<V, F>(
    cache: &Cache<Key, V>,
    key: Key,
    counters: (&AtomicU64, &AtomicU64),
    target: &Target,
    load: F,
) -> Result<V, Error>
where
    V: Clone + Send + Sync + 'static,
    F: Future<Output = Result<V, Error>> + Send + 'static,
{
    let (hits, misses) = counters;
    let failed_task = target.clone();
    let init = async move {
        tokio::spawn(load).await.unwrap_or_else(|_| {
            Err(Error::Transport {
                target: failed_task,
                detail: "the registry request task failed".into(),
                source: None,
            })
        })
    };
    match cache.entry(key).or_try_insert_with(init).await {
        Ok(entry) => {
            let counter = if entry.is_fresh() { misses } else { hits };
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(entry.into_value())
        }
        Err(err) => {
            misses.fetch_add(1, Ordering::Relaxed);
            Err(Error::clone(&err))
        }
    }
}
