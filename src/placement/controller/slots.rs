//! Reconciles in flight per namespace: a namespace whose pods all wait on a registry that never
//! answers holds at most its share of the controller's reconciles, so every other namespace's
//! pods are still reconciled as they come. While fewer than half of the controller's reconciles
//! are in flight, a namespace past its share may borrow more (a burst in one namespace is then
//! released as fast as the apiserver takes it); the other half is always left to namespaces
//! within their share. A pod that may not take a slot waits in its namespace's line, without a
//! reconcile slot, and is woken when one of its namespace's slots is given back.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use futures_util::Stream;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

/// Reconciles in flight, and the pods waiting for one, by namespace.
#[derive(Debug)]
pub(crate) struct NamespaceSlots {
    per_namespace: usize,
    borrow_below: usize,
    state: Mutex<State>,
    wake: mpsc::UnboundedSender<ObjectRef<Pod>>,
}

/// Every namespace's line, and the slots taken in all of them.
#[derive(Debug, Default)]
struct State {
    namespaces: HashMap<String, Line>,
    taken: usize,
}

/// One namespace's reconciles in flight and its pods waiting, each once, first come first woken.
#[derive(Debug, Default)]
struct Line {
    taken: usize,
    waiting: VecDeque<ObjectRef<Pod>>,
    queued: HashSet<ObjectRef<Pod>>,
}

/// One reconcile's slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot<'a> {
    slots: &'a NamespaceSlots,
    namespace: String,
}

/// The pods to reconcile again because a slot of their namespace was given back.
pub(crate) struct Wakes(mpsc::UnboundedReceiver<ObjectRef<Pod>>);

impl Wakes {
    /// As a stream, for the controller's `reconcile_on`.
    pub(crate) fn into_stream(self) -> impl Stream<Item = ObjectRef<Pod>> + Send + 'static {
        futures_util::stream::unfold(self.0, |mut receiver| async move {
            receiver.recv().await.map(|pod| (pod, receiver))
        })
    }
}

impl NamespaceSlots {
    #[cfg(test)]
    /// Namespaces with a reconcile in flight or a pod waiting.
    pub(crate) fn busy(&self) -> usize {
        self.lock().namespaces.len()
    }

    /// At most `per_namespace` reconciles of one namespace at once (at least one), more while
    /// fewer than `borrow_below` are taken in all namespaces; the pods woken when a slot is given
    /// back come out of the [`Wakes`].
    pub(crate) fn new(per_namespace: usize, borrow_below: usize) -> (Self, Wakes) {
        let (wake, wakes) = mpsc::unbounded_channel();
        let slots = NamespaceSlots {
            per_namespace: per_namespace.max(1),
            borrow_below,
            state: Mutex::default(),
            wake,
        };
        (slots, Wakes(wakes))
    }

    /// A slot for `pod` of `namespace`, unless its namespace has all of its own in use and
    /// there is none to borrow: then the pod waits in its namespace's line (once, however often
    /// it asks).
    pub(crate) fn try_take(&self, namespace: &str, pod: &ObjectRef<Pod>) -> Option<Slot<'_>> {
        let mut state = self.lock();
        let may_borrow = state.taken < self.borrow_below;
        let line = state.namespaces.entry(namespace.to_owned()).or_default();
        if line.taken >= self.per_namespace && !may_borrow {
            if line.queued.insert(pod.clone()) {
                line.waiting.push_back(pod.clone());
            }
            return None;
        }
        line.taken += 1;
        if line.queued.remove(pod) {
            line.waiting.retain(|waiting| waiting != pod);
        }
        state.taken += 1;
        Some(Slot {
            slots: self,
            namespace: namespace.to_owned(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update leaves the state consistent: usable after a panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        state.taken = state.taken.saturating_sub(1);
        let Entry::Occupied(mut entry) = state.namespaces.entry(self.namespace.clone()) else {
            return;
        };
        let line = entry.get_mut();
        line.taken = line.taken.saturating_sub(1);
        if let Some(next) = line.waiting.pop_front() {
            line.queued.remove(&next);
            // The controller is gone when the channel is closed: nothing left to wake.
            let _ = self.slots.wake.send(next);
        }
        if line.taken == 0 && line.waiting.is_empty() {
            entry.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> ObjectRef<Pod> {
        ObjectRef::new(name).within("ns")
    }

    #[test]
    fn a_namespace_at_its_share_leaves_the_others_their_slots() {
        let (slots, _wakes) = NamespaceSlots::new(2, 0);
        let first = slots.try_take("stalled", &pod("a")).unwrap();
        let _second = slots.try_take("stalled", &pod("b")).unwrap();
        assert!(
            slots.try_take("stalled", &pod("c")).is_none(),
            "its share is used"
        );
        let other = slots.try_take("healthy", &pod("d"));
        assert!(other.is_some(), "another namespace still gets one");
        drop(first);
        assert!(
            slots.try_take("stalled", &pod("c")).is_some(),
            "given back when done"
        );
    }

    #[test]
    fn a_slot_given_back_wakes_the_first_pod_waiting_in_its_namespace_once() {
        let (slots, mut wakes) = NamespaceSlots::new(1, 0);
        let held = slots.try_take("ns", &pod("a")).unwrap();
        for _ in 0..3 {
            assert!(slots.try_take("ns", &pod("b")).is_none());
        }
        assert!(slots.try_take("ns", &pod("c")).is_none());
        assert!(wakes.0.try_recv().is_err(), "nothing given back yet");
        drop(held);
        assert_eq!(wakes.0.try_recv().ok(), Some(pod("b")), "first come");
        assert!(wakes.0.try_recv().is_err(), "one slot, one wake");
        let next = slots.try_take("ns", &pod("b")).unwrap();
        drop(next);
        assert_eq!(
            wakes.0.try_recv().ok(),
            Some(pod("c")),
            "b asked three times and was woken once; c next"
        );
        assert!(wakes.0.try_recv().is_err());
    }

    #[test]
    fn a_pod_that_gets_a_slot_before_its_wake_leaves_the_line() {
        let (slots, mut wakes) = NamespaceSlots::new(1, 0);
        let held = slots.try_take("ns", &pod("a")).unwrap();
        assert!(slots.try_take("ns", &pod("b")).is_none());
        assert!(slots.try_take("ns", &pod("c")).is_none());
        drop(held);
        assert_eq!(wakes.0.try_recv().ok(), Some(pod("b")));
        // c looks again on its own before b comes back, and gets the slot.
        drop(slots.try_take("ns", &pod("c")).unwrap());
        assert!(
            wakes.0.try_recv().is_err(),
            "c was not left in line to wake"
        );
        assert_eq!(slots.busy(), 0);
    }

    #[test]
    fn a_namespace_alone_borrows_past_its_share_and_the_rest_is_left_to_the_others() {
        // Shares of 2; borrowing while fewer than 4 are taken in all.
        let (slots, _wakes) = NamespaceSlots::new(2, 4);
        let burst: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|name| slots.try_take("burst", &pod(name)).expect("borrowed"))
            .collect();
        assert!(
            slots.try_take("burst", &pod("e")).is_none(),
            "past its share with half in use: it waits"
        );
        let others: Vec<_> = ["f", "g"]
            .iter()
            .map(|name| {
                slots
                    .try_take("other", &pod(name))
                    .expect("within its share")
            })
            .collect();
        assert!(
            slots.try_take("other", &pod("h")).is_none(),
            "the other namespace does not borrow either"
        );
        drop(others);
        drop(burst);
        assert!(
            slots.try_take("burst", &pod("e")).is_some(),
            "borrowing again once slots are back"
        );
    }

    #[test]
    fn a_borrowed_slot_given_back_wakes_its_namespaces_line() {
        let (slots, mut wakes) = NamespaceSlots::new(1, 2);
        let first = slots.try_take("ns", &pod("a")).unwrap();
        let _borrowed = slots.try_take("ns", &pod("b")).unwrap();
        assert!(slots.try_take("ns", &pod("c")).is_none());
        drop(first);
        assert_eq!(wakes.0.try_recv().ok(), Some(pod("c")));
        assert!(slots.try_take("ns", &pod("c")).is_some());
    }

    #[test]
    fn idle_namespaces_are_not_kept() {
        let (slots, _wakes) = NamespaceSlots::new(1, 0);
        drop(slots.try_take("a", &pod("x")).unwrap());
        drop(slots.try_take("b", &pod("y")).unwrap());
        assert_eq!(slots.busy(), 0);
    }
}
