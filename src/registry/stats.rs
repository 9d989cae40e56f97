//! Request and cache counters, for metrics. Counted where they happen; read as a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters shared by the transport and the caches.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub content_hits: AtomicU64,
    pub content_misses: AtomicU64,
    pub tag_hits: AtomicU64,
    pub tag_misses: AtomicU64,
    pub referrers_hits: AtomicU64,
    pub referrers_misses: AtomicU64,
}

/// Hits and misses of one cache. A caller that waited for another's load counts as a hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounts {
    pub hits: u64,
    pub misses: u64,
}

/// A snapshot of the registry client's counters since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistryStats {
    /// HTTP requests sent (token requests and retries included).
    pub requests: u64,
    /// Manifests and blobs by digest.
    pub content: CacheCounts,
    /// Tag → digest resolutions.
    pub tags: CacheCounts,
    /// Referrers listings.
    pub referrers: CacheCounts,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> RegistryStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RegistryStats {
            requests: get(&self.requests),
            content: CacheCounts {
                hits: get(&self.content_hits),
                misses: get(&self.content_misses),
            },
            tags: CacheCounts {
                hits: get(&self.tag_hits),
                misses: get(&self.tag_misses),
            },
            referrers: CacheCounts {
                hits: get(&self.referrers_hits),
                misses: get(&self.referrers_misses),
            },
        }
    }
}
