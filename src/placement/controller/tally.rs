//! The pods the controller released, and the exec format errors of released pods, per policy. A
//! released pod leaves every replica's pod store (see `placement::planner::held`), so
//! `status.pods.released` and `status.pods.execFormatErrors` cannot be counted from it: each
//! release written, and each failure reported, is tallied here ([`Tally`]), and the status keeper
//! adds the tally to the policy's running total ([`Totals`]) when it writes the status, so its
//! work does not grow with the pods released either.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use kube::ResourceExt;
use tokio::sync::Notify;

use crate::api::PlacementPolicy;
use crate::api::PodCounts;

/// Tally written since the status keeper last took them, by policy name.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    fresh: Mutex<BTreeMap<String, i32>>,
    added: Notify,
}

impl Tally {
    fn fresh(&self) -> MutexGuard<'_, BTreeMap<String, i32>> {
        // The map stays whole whatever panicked while holding it.
        self.fresh.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts `n` releases for `policy` and wakes the status keeper (nothing when `n` is 0).
    pub(crate) fn add(&self, policy: &str, n: i32) {
        if n == 0 {
            return;
        }
        let mut fresh = self.fresh();
        let count = fresh.entry(policy.to_owned()).or_default();
        *count = count.saturating_add(n);
        drop(fresh);
        self.added.notify_one();
    }

    /// The releases counted since the last call, by policy name.
    pub(crate) fn take(&self) -> BTreeMap<String, i32> {
        std::mem::take(&mut *self.fresh())
    }

    /// Resolves after the next [`Tally::add`] (or at once if one came since the last wait).
    pub(crate) async fn added(&self) {
        self.added.notified().await;
    }
}

/// One running total last written for each policy, by uid: the stored status can lag behind
/// the keeper's own last write, and a policy deleted and created again under its name starts
/// from zero.
#[derive(Debug)]
pub(super) struct Totals {
    /// Which count of the stored status the total is.
    stored: fn(&PodCounts) -> i32,
    written: HashMap<String, i32>,
}

impl Totals {
    /// The totals of the count `stored` reads from a policy's status.
    pub(super) fn of(stored: fn(&PodCounts) -> i32) -> Self {
        Totals {
            stored,
            written: HashMap::new(),
        }
    }

    /// The total to write for `policy` with `fresh` more releases: what this keeper last
    /// wrote for it, else what its stored status says (written by an earlier leader).
    pub(super) fn total(&self, policy: &PlacementPolicy, fresh: i32) -> i32 {
        let base = policy
            .uid()
            .and_then(|uid| self.written.get(&uid).copied())
            .or_else(|| {
                policy
                    .status
                    .as_ref()
                    .map(|status| (self.stored)(&status.pods))
            })
            .unwrap_or_default();
        base.saturating_add(fresh)
    }

    /// Records that `total` was written for `policy`.
    pub(super) fn written(&mut self, policy: &PlacementPolicy, total: i32) {
        if let Some(uid) = policy.uid() {
            self.written.insert(uid, total);
        }
    }

    /// Forgets every total (leadership lost: the next leader's writes may follow).
    pub(super) fn clear(&mut self) {
        self.written.clear();
    }

    /// Forgets the policies no longer stored.
    pub(super) fn retain<'p>(&mut self, policies: impl IntoIterator<Item = &'p PlacementPolicy>) {
        let stored: std::collections::BTreeSet<String> = policies
            .into_iter()
            .filter_map(|policy| policy.uid())
            .collect();
        self.written.retain(|uid, _| stored.contains(uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PlacementPolicyStatus;

    fn policy(uid: &str, stored_released: Option<i32>) -> PlacementPolicy {
        let spec = serde_json::from_value(serde_json::json!({})).unwrap();
        let mut policy = PlacementPolicy::new("web", spec);
        policy.metadata.uid = Some(uid.to_owned());
        policy.status = stored_released.map(|released| PlacementPolicyStatus {
            pods: PodCounts {
                released,
                ..PodCounts::default()
            },
            ..PlacementPolicyStatus::default()
        });
        policy
    }

    #[test]
    fn releases_are_taken_once_by_policy() {
        let releases = Tally::default();
        releases.add("web", 1);
        releases.add("web", 1);
        releases.add("batch", 1);
        assert_eq!(
            releases.take(),
            BTreeMap::from([("batch".to_owned(), 1), ("web".to_owned(), 2)])
        );
        assert!(releases.take().is_empty(), "each release counted once");
    }

    #[test]
    fn the_total_adds_to_the_last_write_even_before_the_store_shows_it() {
        let mut totals = Totals::of(|pods| pods.released);
        let stale = policy("u-1", Some(10));
        assert_eq!(
            totals.total(&stale, 3),
            13,
            "a new leader continues the stored total"
        );
        totals.written(&stale, 13);
        assert_eq!(totals.total(&stale, 2), 15, "the store still says 10");
        let recreated = policy("u-2", None);
        assert_eq!(
            totals.total(&recreated, 1),
            1,
            "a new policy of the same name"
        );
        totals.retain([&recreated]);
        assert_eq!(
            totals.total(&stale, 0),
            10,
            "the deleted policy's total is forgotten"
        );
    }
}
