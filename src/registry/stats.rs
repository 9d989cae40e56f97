//! Request and cache counters, for metrics. Counted where they happen; read as a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters shared by the transport and the caches.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub responses_2xx: AtomicU64,
    pub responses_3xx: AtomicU64,
    pub responses_4xx: AtomicU64,
    pub responses_5xx: AtomicU64,
    pub no_response: AtomicU64,
    pub content_hits: AtomicU64,
    pub content_misses: AtomicU64,
    pub tag_hits: AtomicU64,
    pub tag_misses: AtomicU64,
    pub referrers_hits: AtomicU64,
    pub referrers_misses: AtomicU64,
    /// Bytes of blobs streamed either way (`blob_stream`, `push_blob_stream`), for progress.
    pub streamed_bytes: AtomicU64,
}

/// Hits and misses of one cache. A caller that waited for another's load counts as a hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounts {
    pub hits: u64,
    pub misses: u64,
}

/// HTTP requests by outcome: the class of the response's status, or no response at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestOutcomes {
    /// 2xx answers.
    pub success: u64,
    /// 3xx answers (redirects are followed by the HTTP client, so rarely seen).
    pub redirect: u64,
    /// 4xx answers: not found, unauthorized, rate limited, bad request.
    pub client_error: u64,
    /// 5xx answers.
    pub server_error: u64,
    /// No answer: connection refused or reset, timeout, TLS failure.
    pub no_response: u64,
}

impl RequestOutcomes {
    /// Each count with its metric label (`2xx`, `3xx`, `4xx`, `5xx`, `error`).
    pub fn labelled(&self) -> [(&'static str, u64); 5] {
        [
            ("2xx", self.success),
            ("3xx", self.redirect),
            ("4xx", self.client_error),
            ("5xx", self.server_error),
            ("error", self.no_response),
        ]
    }

    /// Adds another client's counts.
    pub fn add(&mut self, other: &RequestOutcomes) {
        self.success += other.success;
        self.redirect += other.redirect;
        self.client_error += other.client_error;
        self.server_error += other.server_error;
        self.no_response += other.no_response;
    }
}

/// A snapshot of the registry client's counters since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistryStats {
    /// HTTP requests sent (token requests and retries included).
    pub requests: u64,
    /// The same requests by outcome.
    pub outcomes: RequestOutcomes,
    /// Manifests and blobs by digest.
    pub content: CacheCounts,
    /// Tag → digest resolutions.
    pub tags: CacheCounts,
    /// Referrers listings.
    pub referrers: CacheCounts,
}

impl Counters {
    /// Counts one request's outcome: its answer's status code, or `None` when none came.
    pub(crate) fn answered(&self, status: Option<u16>) {
        let counter = match status {
            Some(200..=299) => &self.responses_2xx,
            Some(300..=399) => &self.responses_3xx,
            Some(400..=499) => &self.responses_4xx,
            Some(500..=599) => &self.responses_5xx,
            // Informational or out-of-range codes never end a request; count them as failed.
            Some(_) | None => &self.no_response,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> RegistryStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RegistryStats {
            requests: get(&self.requests),
            outcomes: RequestOutcomes {
                success: get(&self.responses_2xx),
                redirect: get(&self.responses_3xx),
                client_error: get(&self.responses_4xx),
                server_error: get(&self.responses_5xx),
                no_response: get(&self.no_response),
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_the_class_of_their_answer() {
        let counters = Counters::default();
        for status in [
            Some(200),
            Some(201),
            Some(307),
            Some(404),
            Some(401),
            Some(503),
            None,
        ] {
            counters.answered(status);
        }
        let outcomes = counters.snapshot().outcomes;
        assert_eq!(
            outcomes.labelled(),
            [("2xx", 2), ("3xx", 1), ("4xx", 2), ("5xx", 1), ("error", 1)]
        );
    }
}
