//! The state behind the controller's triggers: what each node's labels were when last seen, and
//! a hash of each NodeFeature's features, so a change is turned into the policies it concerns
//! (through [`Interest`]). A node's labels are remembered as interned keys with hashed values,
//! not copied: the node store holds them once.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use foldhash::fast::FixedState;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::triggers::{Interest, Interests, NodeChange};
use crate::api::ImageSelectionPolicy;
use crate::cluster::ClusterNode;
use crate::engine::NodeFeature;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fingerprint(value: impl Hash) -> u64 {
    FixedState::default().hash_one(value)
}

/// The policies whose interest `concerned` says yes to.
fn policies(
    interests: &Interests,
    concerned: impl Fn(&Interest) -> bool,
) -> Vec<ObjectRef<ImageSelectionPolicy>> {
    interests
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(_, interest)| concerned(interest))
        .map(|(policy, _)| ObjectRef::new(policy))
        .collect()
}

/// Counts changes to the node inventory (labels, nodes, features): equal counts mean equal
/// inventories, so what was read from it can be used again. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(super) struct InventoryVersion(Arc<AtomicU64>);

impl InventoryVersion {
    /// The count now.
    pub(super) fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// What the trackers share with the reconciler: what each policy reads (the reconciler records
/// it, the trackers consult it), and the inventory's version (the trackers count changes, the
/// reconciler reuses what it read while it holds).
#[derive(Clone, Debug, Default)]
pub(super) struct Tracked {
    /// What each reconciled policy reads from nodes.
    pub interests: Interests,
    /// Changes to the node inventory so far.
    pub version: InventoryVersion,
}

/// Remembers each node's labels as last seen (keys interned, values hashed), to tell which
/// policies a change concerns.
pub(super) struct NodeTracker {
    interests: Interests,
    version: InventoryVersion,
    state: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// Label keys by id.
    keys: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
    /// Each node's labels: (key id, value hash), sorted by key id.
    nodes: HashMap<String, Box<[(u32, u64)]>>,
}

impl Seen {
    fn digest(&mut self, node: &ClusterNode) -> Box<[(u32, u64)]> {
        let mut pairs: Vec<(u32, u64)> = node
            .labels()
            .map(|(key, value)| {
                let id = match self.ids.get(key) {
                    Some(id) => *id,
                    None => {
                        let id = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
                        self.keys.push(key.into());
                        self.ids.insert(key.into(), id);
                        id
                    }
                };
                (id, fingerprint(value))
            })
            .collect();
        pairs.sort_unstable();
        pairs.into()
    }

    /// The keys whose presence or value differs between two digests.
    fn changed_keys(&self, before: &[(u32, u64)], after: &[(u32, u64)]) -> Vec<&str> {
        let mut keys: HashSet<u32> = HashSet::new();
        let value = |digest: &[(u32, u64)], id: u32| {
            digest
                .binary_search_by_key(&id, |(k, _)| *k)
                .ok()
                .map(|at| digest[at].1)
        };
        for (id, _) in before.iter().chain(after) {
            if value(before, *id) != value(after, *id) {
                keys.insert(*id);
            }
        }
        keys.into_iter()
            .filter_map(|id| self.keys.get(id as usize).map(|key| &**key))
            .collect()
    }
}

impl NodeTracker {
    /// A tracker for the policies' interests, counting changes in their version.
    pub(super) fn new(tracked: Tracked) -> NodeTracker {
        NodeTracker {
            interests: tracked.interests,
            version: tracked.version,
            state: Mutex::default(),
        }
    }

    /// The policies a node's addition or update concerns.
    pub(super) fn applied(&self, node: &ClusterNode) -> Vec<ObjectRef<ImageSelectionPolicy>> {
        let mut state = lock(&self.state);
        let now = state.digest(node);
        let before = state.nodes.insert(node.name().to_owned(), now.clone());
        if before.as_ref() != Some(&now) {
            self.version.bump();
        }
        match before {
            None => {
                let labels = node.labels_where(|_| true);
                policies(&self.interests, |i| {
                    i.affected_by(NodeChange::Added(&labels))
                })
            }
            Some(before) if before == now => Vec::new(),
            Some(before) => {
                let keys = state.changed_keys(&before, &now);
                let labels = node.labels_where(|_| true);
                policies(&self.interests, |i| {
                    i.affected_by(NodeChange::Changed {
                        labels: &labels,
                        keys: &keys,
                    })
                })
            }
        }
    }

    /// The policies a node's deletion concerns (`node` as last seen).
    pub(super) fn deleted(&self, node: &ClusterNode) -> Vec<ObjectRef<ImageSelectionPolicy>> {
        if lock(&self.state).nodes.remove(node.name()).is_none() {
            return Vec::new();
        }
        self.version.bump();
        let labels = node.labels_where(|_| true);
        policies(&self.interests, |i| {
            i.affected_by(NodeChange::Removed(&labels))
        })
    }

    /// After a relist: forgets nodes the store no longer holds (deleted while the watch was
    /// down, so never announced) and, if there were any, concerns every policy with an
    /// interest (what those nodes were is no longer known).
    pub(super) fn resynced(
        &self,
        store: &Store<ClusterNode>,
    ) -> Vec<ObjectRef<ImageSelectionPolicy>> {
        let present: HashSet<String> = store.state().iter().map(|n| n.name_any()).collect();
        let mut state = lock(&self.state);
        let before = state.nodes.len();
        state.nodes.retain(|name, _| present.contains(name));
        let vanished = state.nodes.len() != before;
        drop(state);
        if vanished {
            self.version.bump();
            policies(&self.interests, |_| true)
        } else {
            Vec::new()
        }
    }
}

/// Remembers a hash of each NodeFeature's features, so a rewrite with the same features (or of
/// its other fields) triggers nothing.
pub(super) struct FeatureTracker {
    interests: Interests,
    version: InventoryVersion,
    last: Mutex<HashMap<(String, String), u64>>,
}

impl FeatureTracker {
    /// A tracker for the policies' interests, counting changes in their version.
    pub(super) fn new(tracked: Tracked) -> FeatureTracker {
        FeatureTracker {
            interests: tracked.interests,
            version: tracked.version,
            last: Mutex::default(),
        }
    }

    /// The policies reading NFD features, when this object's features changed (`deleted`: it
    /// is gone).
    pub(super) fn changed(
        &self,
        object: &NodeFeature,
        deleted: bool,
    ) -> Vec<ObjectRef<ImageSelectionPolicy>> {
        let key = (object.namespace().unwrap_or_default(), object.name_any());
        let now = (!deleted)
            .then(|| fingerprint(serde_json::to_string(&object.spec.features).unwrap_or_default()));
        let before = {
            let mut last = lock(&self.last);
            match now {
                Some(hash) => last.insert(key, hash),
                None => last.remove(&key),
            }
        };
        if before == now {
            return Vec::new();
        }
        self.version.bump();
        policies(&self.interests, Interest::reads_features)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, RwLock};

    use super::*;
    use crate::engine::Reads;

    fn node(name: &str, flavor: &str, team: &str) -> ClusterNode {
        let mut strings = crate::cluster::Strings::default();
        ClusterNode::new(name, [("flavor", flavor), ("team", team)], &mut strings)
    }

    fn interests() -> Interests {
        Arc::new(RwLock::new(HashMap::from([(
            "flavors".to_owned(),
            Interest {
                node_selector: BTreeMap::new(),
                reads: Reads {
                    labels: ["flavor".to_owned()].into(),
                    features: BTreeMap::new(),
                },
            },
        )])))
    }

    #[test]
    fn node_events_trigger_only_policies_whose_classes_they_change() {
        let tracked = Tracked {
            interests: interests(),
            version: InventoryVersion::default(),
        };
        let tracker = NodeTracker::new(tracked.clone());
        let apply = |n: ClusterNode| tracker.applied(&n).len();
        assert_eq!(apply(node("a", "vanilla", "x")), 1, "a new node counts");
        let version = tracked.version.get();
        assert_eq!(apply(node("a", "vanilla", "x")), 0, "a heartbeat");
        assert_eq!(
            tracked.version.get(),
            version,
            "a heartbeat changes nothing"
        );
        assert_eq!(apply(node("a", "vanilla", "y")), 0, "an unread label");
        assert!(tracked.version.get() > version, "but the inventory changed");
        assert_eq!(apply(node("a", "chocolate", "y")), 1, "a read label");
        let gone = node("a", "chocolate", "y");
        assert_eq!(tracker.deleted(&gone).len(), 1, "a deleted node");
        assert_eq!(tracker.deleted(&gone).len(), 0, "deleted twice");
    }

    #[test]
    fn a_node_deleted_while_the_watch_was_down_concerns_every_policy_after_the_relist() {
        let tracker = NodeTracker::new(Tracked {
            interests: interests(),
            version: InventoryVersion::default(),
        });
        tracker.applied(&node("a", "vanilla", "x"));
        let (store, mut writer) = kube::runtime::reflector::store::<ClusterNode>();
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Init);
        writer.apply_watcher_event(&kube::runtime::watcher::Event::InitDone);
        assert_eq!(tracker.resynced(&store).len(), 1);
        assert_eq!(tracker.resynced(&store).len(), 0, "forgotten once");
    }
}
