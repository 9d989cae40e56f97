//! Reconciles in flight per namespace: a namespace whose pods all wait on a registry that never
//! answers holds at most its share of the controller's reconciles, so every other namespace's
//! pods are still reconciled as they come. A pod of a namespace at its share is looked at again
//! shortly, without waiting in a reconcile slot.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Reconciles in flight, by namespace.
#[derive(Debug)]
pub struct NamespaceSlots {
    per_namespace: usize,
    taken: Mutex<HashMap<String, usize>>,
}

/// One reconcile's slot, given back when dropped.
#[derive(Debug)]
pub struct Slot<'a> {
    slots: &'a NamespaceSlots,
    namespace: String,
}

impl NamespaceSlots {
    /// At most `per_namespace` reconciles of one namespace at once (at least one).
    pub fn new(per_namespace: usize) -> Self {
        NamespaceSlots {
            per_namespace: per_namespace.max(1),
            taken: Mutex::default(),
        }
    }

    /// A slot for a pod of `namespace`, unless its namespace has all of its own in use.
    pub fn try_take(&self, namespace: &str) -> Option<Slot<'_>> {
        let mut taken = self.lock();
        let count = taken.entry(namespace.to_owned()).or_default();
        if *count >= self.per_namespace {
            return None;
        }
        *count += 1;
        Some(Slot {
            slots: self,
            namespace: namespace.to_owned(),
        })
    }

    /// Namespaces with a reconcile in flight.
    pub fn busy(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        // Every update is one counter step: the map stays consistent after a panic.
        self.taken.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut taken = self.slots.lock();
        if let Some(count) = taken.get_mut(&self.namespace) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                taken.remove(&self.namespace);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_at_its_share_leaves_the_others_their_slots() {
        let slots = NamespaceSlots::new(2);
        let first = slots.try_take("stalled").unwrap();
        let _second = slots.try_take("stalled").unwrap();
        assert!(slots.try_take("stalled").is_none(), "its share is used");
        let other = slots.try_take("healthy");
        assert!(other.is_some(), "another namespace still gets one");
        drop(first);
        assert!(slots.try_take("stalled").is_some(), "given back when done");
    }

    #[test]
    fn idle_namespaces_are_not_kept() {
        let slots = NamespaceSlots::new(1);
        drop(slots.try_take("a").unwrap());
        drop(slots.try_take("b").unwrap());
        assert_eq!(slots.busy(), 0);
    }
}
