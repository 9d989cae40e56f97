//! Reconciles in flight per namespace: a namespace whose pods all wait on a registry that never
//! answers holds at most its share of the controller's reconciles, so every other namespace's
//! pods are still reconciled as they come. A pod of a namespace at its share waits in that
//! namespace's line, without a reconcile slot, and is woken when one of its namespace's slots is
//! given back: a burst in one namespace is released as fast as its share allows, not in rounds.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use futures_util::Stream;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

/// Reconciles in flight, and the pods waiting for one, by namespace.
#[derive(Debug)]
pub struct NamespaceSlots {
    per_namespace: usize,
    namespaces: Mutex<HashMap<String, Line>>,
    wake: mpsc::UnboundedSender<ObjectRef<Pod>>,
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
pub struct Slot<'a> {
    slots: &'a NamespaceSlots,
    namespace: String,
}

/// The pods to reconcile again because a slot of their namespace was given back.
pub struct Wakes(mpsc::UnboundedReceiver<ObjectRef<Pod>>);

impl Wakes {
    /// As a stream, for the controller's `reconcile_on`.
    pub fn into_stream(self) -> impl Stream<Item = ObjectRef<Pod>> + Send + 'static {
        futures_util::stream::unfold(self.0, |mut receiver| async move {
            receiver.recv().await.map(|pod| (pod, receiver))
        })
    }
}

impl NamespaceSlots {
    /// At most `per_namespace` reconciles of one namespace at once (at least one); the pods
    /// woken when a slot is given back come out of the [`Wakes`].
    pub fn new(per_namespace: usize) -> (Self, Wakes) {
        let (wake, wakes) = mpsc::unbounded_channel();
        let slots = NamespaceSlots {
            per_namespace: per_namespace.max(1),
            namespaces: Mutex::default(),
            wake,
        };
        (slots, Wakes(wakes))
    }

    /// A slot for `pod` of `namespace`, unless its namespace has all of its own in use: then
    /// the pod waits in its namespace's line (once, however often it asks).
    pub fn try_take(&self, namespace: &str, pod: &ObjectRef<Pod>) -> Option<Slot<'_>> {
        let mut namespaces = self.lock();
        let line = namespaces.entry(namespace.to_owned()).or_default();
        if line.taken >= self.per_namespace {
            if line.queued.insert(pod.clone()) {
                line.waiting.push_back(pod.clone());
            }
            return None;
        }
        line.taken += 1;
        if line.queued.remove(pod) {
            line.waiting.retain(|waiting| waiting != pod);
        }
        Some(Slot {
            slots: self,
            namespace: namespace.to_owned(),
        })
    }

    /// Namespaces with a reconcile in flight or a pod waiting.
    pub fn busy(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Line>> {
        // Every update leaves the map consistent: usable after a panic.
        self.namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut namespaces = self.slots.lock();
        let Entry::Occupied(mut entry) = namespaces.entry(self.namespace.clone()) else {
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
        let (slots, _wakes) = NamespaceSlots::new(2);
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
        let (slots, mut wakes) = NamespaceSlots::new(1);
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
        let (slots, mut wakes) = NamespaceSlots::new(1);
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
    fn idle_namespaces_are_not_kept() {
        let (slots, _wakes) = NamespaceSlots::new(1);
        drop(slots.try_take("a", &pod("x")).unwrap());
        drop(slots.try_take("b", &pod("y")).unwrap());
        assert_eq!(slots.busy(), 0);
    }
}
