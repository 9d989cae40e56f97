//! Each namespace's share of an Event queue: a token bucket per namespace that caused the
//! Event ([`BURST`] at once, [`RATE`] a second), so one namespace flooding the queue (pods made
//! faster than the apiserver takes Events) fills only its own share and another namespace's
//! Event still finds room. The buckets are bounded: at most [`NAMESPACES`] are kept, a full one
//! (the same as none) is forgotten when room is needed, and beyond that the newcomers share one
//! bucket. Pure: the time is given.

use std::collections::HashMap;
use std::time::Instant;

/// Events one namespace may queue at once: a quarter of the queue, so a Job of a few hundred pods
/// released together gets each its Event and three namespaces flooding at once still leave room.
pub(super) const BURST: f64 = 256.0;
/// Events a second a namespace's bucket refills with, past the burst.
pub(super) const RATE: f64 = 10.0;
/// Namespaces with a bucket of their own: each costs its name and two numbers.
pub(super) const NAMESPACES: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl Bucket {
    fn full(now: Instant) -> Bucket {
        Bucket {
            tokens: BURST,
            refilled: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * RATE).min(BURST);
        self.refilled = self.refilled.max(now);
    }

    fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// The buckets of one queue.
#[derive(Debug)]
pub(super) struct Quota {
    buckets: HashMap<String, Bucket>,
    /// Shared by namespaces that found no room for a bucket of their own.
    overflow: Bucket,
}

impl Quota {
    pub(super) fn new(now: Instant) -> Quota {
        Quota {
            buckets: HashMap::new(),
            overflow: Bucket::full(now),
        }
    }

    /// Whether `namespace` (empty for a cluster-scoped cause) may queue one more Event at `now`.
    pub(super) fn allow(&mut self, namespace: &str, now: Instant) -> bool {
        if let Some(bucket) = self.buckets.get_mut(namespace) {
            return bucket.take(now);
        }
        if self.buckets.len() >= NAMESPACES {
            self.buckets.retain(|_, bucket| {
                bucket.refill(now);
                bucket.tokens < BURST
            });
        }
        if self.buckets.len() >= NAMESPACES {
            return self.overflow.take(now);
        }
        let mut bucket = Bucket::full(now);
        let allowed = bucket.take(now);
        self.buckets.insert(namespace.to_owned(), bucket);
        allowed
    }

    #[cfg(test)]
    pub(super) fn namespaces(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_namespace_gets_its_burst_then_its_rate_and_others_their_own() {
        let start = Instant::now();
        let mut quota = Quota::new(start);
        let burst = (0..1000).filter(|_| quota.allow("flood", start)).count();
        assert_eq!(burst, BURST as usize);
        assert!(quota.allow("quiet", start), "another namespace has its own");
        let later = start + Duration::from_secs(5);
        let refilled = (0..1000).filter(|_| quota.allow("flood", later)).count();
        assert_eq!(refilled, (5.0 * RATE) as usize);
    }

    /// A namespace per Event (as many namespaces' pods, or a forger's names) keeps at most
    /// [`NAMESPACES`] buckets, and the ones that spent their burst keep theirs.
    #[test]
    fn the_buckets_stay_bounded_however_many_namespaces_send() {
        let start = Instant::now();
        let mut quota = Quota::new(start);
        for _ in 0..BURST as usize {
            assert!(quota.allow("flood", start));
        }
        for n in 0..10 * NAMESPACES {
            quota.allow(&format!("ns-{n}"), start);
            assert!(quota.namespaces() <= NAMESPACES, "{}", quota.namespaces());
        }
        assert!(
            !quota.allow("flood", start),
            "a spent bucket is not forgotten to make room"
        );
    }
}
