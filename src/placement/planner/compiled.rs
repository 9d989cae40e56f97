//! The placement policies compiled once per change of the policy store, shared by everyone who
//! reads them: the gate (the usable ones, lock-free on every admission), the controller (the
//! policy a held pod names, or why it cannot be used), node tainting and status (each policy's
//! verdict). No pod reconcile or admission compiles a policy.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use futures_util::Stream;
use kube::ResourceExt;
use tokio::sync::watch;

use super::policy::{Policy, PolicyError};
use crate::api::PlacementPolicy;

/// One stored policy and what compiling it gave.
#[derive(Debug)]
pub struct Compiled {
    /// The policy as stored (status is written against it).
    pub stored: Arc<PlacementPolicy>,
    /// The policy, or why it cannot be used (its `Ready` condition says the same).
    pub policy: Result<Policy, PolicyError>,
}

impl Compiled {
    /// Compiles a stored policy.
    pub fn new(stored: Arc<PlacementPolicy>) -> Self {
        Compiled {
            policy: Policy::compile(&stored),
            stored,
        }
    }
}

/// Every stored policy compiled, as of one state of the store.
#[derive(Debug, Default)]
pub struct PolicySet {
    /// Each stored policy, in the store's order.
    pub all: Vec<Compiled>,
    /// The ones that compile, as the gate reads them.
    usable: Arc<Vec<Policy>>,
}

impl PolicySet {
    /// Compiles each stored policy.
    pub fn compile(stored: impl IntoIterator<Item = Arc<PlacementPolicy>>) -> Self {
        let all: Vec<Compiled> = stored.into_iter().map(Compiled::new).collect();
        let usable = all
            .iter()
            .filter_map(|compiled| compiled.policy.as_ref().ok().cloned())
            .collect();
        PolicySet {
            all,
            usable: Arc::new(usable),
        }
    }

    /// A set of usable policies only (tests of the gate, which reads nothing else).
    #[cfg(test)]
    pub fn usable_only(policies: Vec<Policy>) -> Self {
        PolicySet {
            all: Vec::new(),
            usable: Arc::new(policies),
        }
    }

    /// The policy named `name`: `None` when none is stored under that name.
    pub fn get(&self, name: &str) -> Option<&Result<Policy, PolicyError>> {
        self.all
            .iter()
            .find(|compiled| compiled.stored.name_any() == name)
            .map(|compiled| &compiled.policy)
    }

    /// The architectures whose nodes ocifit taints (every usable policy's node tainting).
    pub fn tainted(&self) -> BTreeSet<String> {
        self.usable
            .iter()
            .flat_map(|policy| policy.tainted.iter().cloned())
            .collect()
    }
}

/// The policy set, replaced as a whole whenever the store changes (readers never lock), with a
/// signal for those who act on each change. Cheap to clone.
#[derive(Clone, Debug)]
pub struct UsablePolicies {
    current: Arc<ArcSwap<PolicySet>>,
    /// Set by the first [`UsablePolicies::store`]: until then the empty set means "not read
    /// yet", not "no policy", and the gate must not count as ready (it would pass every pod).
    stored: Arc<AtomicBool>,
    changed: Arc<watch::Sender<()>>,
}

impl Default for UsablePolicies {
    fn default() -> Self {
        UsablePolicies {
            current: Arc::default(),
            stored: Arc::default(),
            changed: Arc::new(watch::Sender::new(())),
        }
    }
}

impl UsablePolicies {
    /// The usable policies now (the gate's view).
    pub fn load(&self) -> Arc<Vec<Policy>> {
        Arc::clone(&self.current.load().usable)
    }

    /// The whole set now.
    pub fn set(&self) -> Arc<PolicySet> {
        self.current.load_full()
    }

    /// Replaces the set and tells every subscriber.
    pub fn store(&self, set: PolicySet) {
        self.current.store(Arc::new(set));
        self.stored.store(true, Ordering::Release);
        self.changed.send_replace(());
    }

    /// Whether the set was stored at least once.
    pub fn stored(&self) -> bool {
        self.stored.load(Ordering::Acquire)
    }

    /// One item after each [`store`](Self::store) from now on (changes in a burst may make one).
    pub fn changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        let mut receiver = self.changed.subscribe();
        receiver.mark_unchanged();
        futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.changed().await.ok().map(|()| ((), receiver))
        })
    }
}

#[cfg(test)]
mod tests {
    use futures_util::{FutureExt, StreamExt};
    use serde_json::json;

    use super::*;
    use crate::placement::fixtures::stored_policy;

    fn stored(name: &str, spec: serde_json::Value) -> Arc<PlacementPolicy> {
        Arc::new(stored_policy(name, spec))
    }

    #[test]
    fn each_policy_is_compiled_once_into_the_set_and_an_invalid_one_keeps_its_error() {
        let set = PolicySet::compile([
            stored(
                "arm",
                json!({"nodeTainting": {"architectures": ["aarch64"]}}),
            ),
            stored(
                "broken",
                json!({"onInspectionFailure": {"action": "Fallback"}}),
            ),
        ]);
        assert_eq!(set.all.len(), 2);
        assert!(matches!(set.get("arm"), Some(Ok(policy)) if policy.name == "arm"));
        assert!(matches!(
            set.get("broken"),
            Some(Err(PolicyError::MissingFallback))
        ));
        assert!(set.get("gone").is_none());
        assert_eq!(set.tainted(), BTreeSet::from(["arm64".to_owned()]));
        let usable = UsablePolicies::default();
        usable.store(set);
        let gate = usable.load();
        let names: Vec<&str> = gate.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["arm"], "the gate sees only the usable policy");
    }

    #[test]
    fn a_subscriber_hears_of_each_store_after_it_subscribed() {
        let usable = UsablePolicies::default();
        usable.store(PolicySet::default());
        let mut changes = Box::pin(usable.changes());
        assert!(changes.next().now_or_never().is_none(), "no store since");
        usable.store(PolicySet::default());
        assert_eq!(changes.next().now_or_never(), Some(Some(())));
    }
}
