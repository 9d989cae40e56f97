//! Every PlacementPolicy's status (leader only): `observedGeneration`, the counts of the pods it
//! gated by state, and `Ready` (its selectors and durations read, or why not). The gated and held
//! counts are recomputed from the compiled policies and the pod store when the policies are
//! compiled anew, a watched pod changes, a release is written or an exec format error reported,
//! at most once per [`PAUSE`]. A released pod leaves every pod store, so the released and exec
//! format error counts are tallied as each is written ([`Tally`]) and added to the policy's
//! running totals ([`Totals`]), so the work does not grow with the pods released. Written only
//! when it differs from what is stored.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use tokio::sync::Notify;

use crate::api::{ConditionType, FIELD_MANAGER, PlacementPolicy, WantedCondition, merge_condition};
use crate::api::{PlacementPolicyStatus, PlacementReason, PodCounts};
use crate::cluster::ClusterView;
use crate::cluster::Reflected;
use crate::placement::planner::{Compiled, PolicySet, UsablePolicies};
use crate::placement::status::{counts, gates};
use crate::telemetry::Metrics;

/// Least time between two passes (a burst of pod changes makes one pass).
pub(super) const PAUSE: Duration = Duration::from_millis(500);

/// The running totals of a policy's status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Running {
    pub released: i32,
    pub exec_format_errors: i32,
    /// Misplaced pods the audit reported.
    pub misplaced: i32,
}

/// The status a compiled policy should have, given every watched pod's counts and its running
/// totals; the stored condition's transition time is kept while its status is unchanged.
pub(super) fn desired(
    compiled: &Compiled,
    counts: &BTreeMap<String, PodCounts>,
    running: Running,
    now: Timestamp,
) -> PlacementPolicyStatus {
    let policy = &compiled.stored;
    let (status, reason, message) = match &compiled.policy {
        Ok(_) => (
            true,
            PlacementReason::Valid,
            "the policy gates the pods it selects".to_owned(),
        ),
        Err(err) => (false, err.reason(), err.to_string()),
    };
    let previous = policy.status.as_ref().map(|s| s.conditions.as_slice());
    let wanted = WantedCondition {
        type_: ConditionType::Ready,
        status,
        reason: reason.as_str(),
        message,
    };
    PlacementPolicyStatus {
        observed_generation: policy.metadata.generation,
        pods: PodCounts {
            released: running.released,
            exec_format_errors: running.exec_format_errors,
            misplaced: running.misplaced,
            ..counts.get(&policy.name_any()).cloned().unwrap_or_default()
        },
        conditions: vec![merge_condition(
            previous.unwrap_or_default(),
            wanted,
            policy.metadata.generation,
            &Time(now),
        )],
    }
}

/// Wakes each time `tally` counts something.
fn added(tally: Arc<Tally>) -> impl futures_util::Stream<Item = ()> {
    futures_util::stream::unfold(tally, |tally| async move {
        tally.added().await;
        Some(((), tally))
    })
}

/// Batches of changes: the policies compiled anew, a watched pod changed, a tally counted.
fn changes(
    policies: &UsablePolicies,
    pods: &Reflected<Pod>,
    tallies: [&Arc<Tally>; 3],
) -> impl futures_util::Stream<Item = Vec<()>> + use<> {
    let mut streams = vec![
        policies.changes().boxed(),
        pods.subscribe().map(|_| ()).boxed(),
    ];
    streams.extend(tallies.map(|tally| added(Arc::clone(tally)).boxed()));
    futures_util::stream::select_all(streams).ready_chunks(1024)
}

/// What the status keeper reads.
pub(crate) struct StatusKeeper {
    pub cluster: ClusterView,
    pub policies: UsablePolicies,
    pub pods: Reflected<Pod>,
    pub releases: Arc<Tally>,
    /// Exec format errors reported.
    pub exec_errors: Arc<Tally>,
    /// Misplaced pods the audit reported.
    pub misplaced: Arc<Tally>,
    pub metrics: Arc<Metrics>,
}

/// Keeps the status of every policy until the streams end.
pub(crate) async fn keep_status(keeper: StatusKeeper) {
    let StatusKeeper {
        cluster,
        policies,
        pods,
        releases,
        exec_errors,
        misplaced,
        metrics,
    } = keeper;
    let mut changes = std::pin::pin!(changes(
        &policies,
        &pods,
        [&releases, &exec_errors, &misplaced]
    ));
    let api: Api<PlacementPolicy> = Api::all(cluster.client.clone());
    let mut totals = Totals::of(|pods| pods.released);
    let mut failures = Totals::of(|pods| pods.exec_format_errors);
    let mut misplacements = Totals::of(|pods| pods.misplaced);
    while changes.next().await.is_some() {
        // Every replica holds the same pods (what its memory grows with): shown on each.
        if pods.synced() {
            metrics.set_store_size("placement_pods", pods.store().len());
        }
        if !cluster.leadership.is_leader() {
            metrics.clear_placement();
            totals.clear();
            failures.clear();
            misplacements.clear();
            releases.take();
            exec_errors.take();
            misplaced.take();
            continue;
        }
        if !policies.stored() || !pods.synced() {
            continue;
        }
        let pod_state = pods.store().state();
        let counted = counts(pod_state.iter().map(AsRef::as_ref));
        let set = policies.set();
        record(&metrics, &set, &pod_state);
        totals.retain(set.all.iter().map(|compiled| compiled.stored.as_ref()));
        failures.retain(set.all.iter().map(|compiled| compiled.stored.as_ref()));
        misplacements.retain(set.all.iter().map(|compiled| compiled.stored.as_ref()));
        // Counts of policies no longer stored are dropped with them.
        let mut fresh = releases.take();
        let mut failed = exec_errors.take();
        let mut found = misplaced.take();
        for compiled in &set.all {
            let policy = &compiled.stored;
            let name = policy.name_any();
            let added = fresh.remove(&name).unwrap_or_default();
            let added_failures = failed.remove(&name).unwrap_or_default();
            let added_misplaced = found.remove(&name).unwrap_or_default();
            let running = Running {
                released: totals.total(policy, added),
                exec_format_errors: failures.total(policy, added_failures),
                misplaced: misplacements.total(policy, added_misplaced),
            };
            let status = desired(compiled, &counted, running, Timestamp::now());
            if policy.status.as_ref() == Some(&status) {
                totals.written(policy, running.released);
                failures.written(policy, running.exec_format_errors);
                misplacements.written(policy, running.misplaced);
                continue;
            }
            let patch = serde_json::json!({
                "apiVersion": PlacementPolicy::api_version(&()),
                "kind": PlacementPolicy::kind(&()),
                "status": status,
            });
            match api
                .patch_status(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await
            {
                Ok(_) => {
                    metrics.status_written();
                    totals.written(policy, running.released);
                    failures.written(policy, running.exec_format_errors);
                    misplacements.written(policy, running.misplaced);
                }
                Err(err) => {
                    // Counted again on the next pass.
                    releases.add(&name, added);
                    exec_errors.add(&name, added_failures);
                    misplaced.add(&name, added_misplaced);
                    tracing::warn!(policy = %name, error = %err, "failed to write the placement policy's status")
                }
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// Sets placement's gauges: each policy's gated pods with its bound, and how many are Ready.
fn record(metrics: &Metrics, policies: &PolicySet, pods: &[Arc<Pod>]) {
    let mut gated = gates(pods.iter().map(AsRef::as_ref));
    let mut ready = 0;
    for compiled in policies.all.iter().filter_map(|c| c.policy.as_ref().ok()) {
        ready += 1;
        gated
            .entry(compiled.name.clone())
            .or_default()
            .bound_seconds = Some(compiled.failure.timeout.as_secs_f64());
    }
    metrics.set_placement(gated.iter().map(|(name, g)| (name.as_str(), g.clone())));
    metrics.set_placement_policies(ready, policies.all.len() - ready);
}

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
    use serde_json::json;

    use super::*;
    use crate::placement::fixtures::stored_policy;

    fn stored(name: &str, spec: serde_json::Value) -> PlacementPolicy {
        let mut policy = stored_policy(name, spec);
        policy.metadata.generation = Some(3);
        policy
    }

    fn compiled(policy: &PlacementPolicy) -> Compiled {
        Compiled::new(Arc::new(policy.clone()))
    }

    #[test]
    fn a_valid_policy_is_ready_with_its_own_counts_and_released_total_and_keeps_its_transition_time()
     {
        let counted = BTreeMap::from([(
            "arm".to_owned(),
            PodCounts {
                gated: 2,
                held: 1,
                released: 0,
                ..PodCounts::default()
            },
        )]);
        let mut policy = stored("arm", json!({}));
        let running = Running {
            released: 7,
            exec_format_errors: 2,
            misplaced: 4,
        };
        let first = desired(&compiled(&policy), &counted, running, Timestamp::UNIX_EPOCH);
        assert_eq!(
            first.pods,
            PodCounts {
                gated: 2,
                held: 1,
                released: 7,
                exec_format_errors: 2,
                misplaced: 4,
            }
        );
        assert_eq!(first.observed_generation, Some(3));
        assert_eq!(
            (
                first.conditions[0].status.as_str(),
                first.conditions[0].reason.as_str()
            ),
            ("True", "Valid")
        );
        policy.status = Some(first.clone());
        let again = desired(&compiled(&policy), &counted, running, Timestamp::now());
        assert_eq!(again, first, "nothing changed: nothing to write");
    }

    #[test]
    fn an_unreadable_selector_is_not_ready_naming_the_field() {
        let policy = stored(
            "bad",
            json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}),
        );
        let status = desired(
            &compiled(&policy),
            &BTreeMap::new(),
            Running::default(),
            Timestamp::UNIX_EPOCH,
        );
        let ready = &status.conditions[0];
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "InvalidSelector")
        );
        assert!(
            ready.message.contains("spec.podSelector"),
            "{}",
            ready.message
        );
        assert_eq!(status.pods, PodCounts::default());
    }

    mod tally {
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
}
