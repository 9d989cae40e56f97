//! Which policies a node change concerns, and the state behind it. A policy's classes depend
//! only on whether a node counts under its nodeSelector and on the values its artifact reads
//! (plus arch and os), so a change to any other label reconciles nothing ([`Interest`], pure).
//! The trackers remember what each node's labels were when last seen (interned keys with hashed
//! values, not copies: the node store holds them once) and a hash of each NodeFeature's
//! features, so a change is turned into the policies it concerns.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use foldhash::fast::FixedState;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::ImageSelectionPolicy;
use crate::classes::{CONTROL_PLANE_LABELS, distinguishes, node_counts};
use crate::cluster::ClusterNode;
use crate::engine::{NodeFeature, Reads};

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

/// What each reconciled policy reads from nodes, by policy name; the node watch's mapper reads it
/// to decide which policies a node change concerns.
pub(super) type Interests = Arc<RwLock<HashMap<String, Interest>>>;

/// Node labels by key.
pub(super) type Labels = BTreeMap<String, String>;

/// What happened to one node, as the tracker saw it.
#[derive(Clone, Copy, Debug)]
pub(super) enum NodeChange<'a> {
    /// A node seen for the first time, with its labels.
    Added(&'a Labels),
    /// A known node whose labels `keys` changed (added, removed or given another value); its
    /// labels now.
    Changed {
        /// Its labels now.
        labels: &'a Labels,
        /// The keys whose presence or value changed.
        keys: &'a [&'a str],
    },
    /// A node gone, with its last labels.
    Removed(&'a Labels),
}

/// What a reconciled policy reads from nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Interest {
    /// The policy's `spec.nodeSelector`.
    pub node_selector: Labels,
    /// What its artifact reads.
    pub reads: Reads,
}

impl Interest {
    /// Whether the policy reads NFD features (so NodeFeature changes concern it).
    pub(super) fn reads_features(&self) -> bool {
        !self.reads.features.is_empty()
    }

    /// Whether `change` can change the policy's classes or their node counts.
    pub(super) fn affected_by(&self, change: NodeChange<'_>) -> bool {
        match change {
            NodeChange::Added(labels) | NodeChange::Removed(labels) => {
                node_counts(&self.node_selector, labels)
            }
            NodeChange::Changed { labels, keys } => {
                let decides_counting = |key: &&str| {
                    self.node_selector.contains_key(*key) || CONTROL_PLANE_LABELS.contains(key)
                };
                keys.iter().any(|key| self.reads_label(key))
                    && (keys.iter().any(decides_counting)
                        || node_counts(&self.node_selector, labels))
            }
        }
    }

    /// Whether the policy's status can depend on a node's label `key`: it draws classes on it,
    /// or decides with it whether the node counts. Other labels need not be kept for it.
    pub(super) fn reads_label(&self, key: &str) -> bool {
        distinguishes(&self.reads, key)
            || self.node_selector.contains_key(key)
            || CONTROL_PLANE_LABELS.contains(&key)
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

    mod triggers {
        use super::*;
        use crate::classes::{ARCH_LABEL, OS_LABEL};
        use crate::engine::FeatureReads;

        #[test]
        fn a_policy_reads_its_keys_selector_arch_os_and_control_plane_labels_only() {
            let mut interest = flavor_interest();
            interest.node_selector.insert("pool".into(), "batch".into());
            for key in [
                "feature.node.ocifit-k8s.flavor",
                "pool",
                ARCH_LABEL,
                OS_LABEL,
                "node-role.kubernetes.io/control-plane",
            ] {
                assert!(interest.reads_label(key), "{key}");
            }
            for key in [
                "kubernetes.io/hostname",
                "feature.node.kubernetes.io/cpu-cpuid.AVX2",
            ] {
                assert!(!interest.reads_label(key), "{key}");
            }
        }

        /// What the tracker would report for a node going from `before` to `after`.
        fn affected(interest: &Interest, before: Option<&Labels>, after: Option<&Labels>) -> bool {
            match (before, after) {
                (None, Some(labels)) => interest.affected_by(NodeChange::Added(labels)),
                (Some(labels), None) => interest.affected_by(NodeChange::Removed(labels)),
                (Some(before), Some(after)) => {
                    let keys: Vec<&str> = before
                        .keys()
                        .chain(after.keys())
                        .filter(|key| before.get(*key) != after.get(*key))
                        .map(String::as_str)
                        .collect();
                    interest.affected_by(NodeChange::Changed {
                        labels: after,
                        keys: &keys,
                    })
                }
                (None, None) => false,
            }
        }

        fn labels(pairs: &[(&str, &str)]) -> Labels {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        }

        fn flavor_interest() -> Interest {
            Interest {
                node_selector: Labels::new(),
                reads: Reads {
                    labels: ["feature.node.ocifit-k8s.flavor".to_owned()].into(),
                    features: BTreeMap::new(),
                },
            }
        }

        const FLAVOR: &str = "feature.node.ocifit-k8s.flavor";

        #[test]
        fn a_label_the_artifact_does_not_read_concerns_no_policy() {
            let interest = flavor_interest();
            let before = labels(&[(FLAVOR, "vanilla"), ("team", "a")]);
            let after = labels(&[(FLAVOR, "vanilla"), ("team", "b")]);
            assert!(!affected(&interest, Some(&before), Some(&after)));
        }

        #[test]
        fn a_read_label_arch_or_os_change_concerns_the_policy() {
            let interest = flavor_interest();
            let before = labels(&[(FLAVOR, "vanilla"), (ARCH_LABEL, "amd64")]);
            for after in [
                labels(&[(FLAVOR, "chocolate"), (ARCH_LABEL, "amd64")]),
                labels(&[(FLAVOR, "vanilla"), (ARCH_LABEL, "arm64")]),
                labels(&[
                    (FLAVOR, "vanilla"),
                    (ARCH_LABEL, "amd64"),
                    (OS_LABEL, "linux"),
                ]),
                labels(&[(ARCH_LABEL, "amd64")]),
            ] {
                assert!(
                    affected(&interest, Some(&before), Some(&after)),
                    "{after:?}"
                );
            }
        }

        #[test]
        fn a_counted_node_appearing_or_going_concerns_the_policy() {
            let interest = flavor_interest();
            let node = labels(&[(FLAVOR, "vanilla")]);
            assert!(affected(&interest, None, Some(&node)));
            assert!(affected(&interest, Some(&node), None));
        }

        #[test]
        fn control_plane_nodes_concern_only_policies_that_select_them() {
            let interest = flavor_interest();
            let cp = labels(&[
                (FLAVOR, "vanilla"),
                ("node-role.kubernetes.io/control-plane", ""),
            ]);
            assert!(!affected(&interest, None, Some(&cp)));
            let selecting = Interest {
                node_selector: labels(&[("node-role.kubernetes.io/control-plane", "")]),
                ..flavor_interest()
            };
            assert!(affected(&selecting, None, Some(&cp)));
        }

        #[test]
        fn leaving_the_node_selector_concerns_the_policy() {
            let interest = Interest {
                node_selector: labels(&[("pool", "gpu")]),
                ..flavor_interest()
            };
            let inside = labels(&[("pool", "gpu"), (FLAVOR, "vanilla")]);
            let outside = labels(&[("pool", "cpu"), (FLAVOR, "vanilla")]);
            assert!(affected(&interest, Some(&inside), Some(&outside)));
            assert!(!affected(&interest, Some(&outside), Some(&outside)));
        }

        #[test]
        fn nfd_policies_follow_the_feature_labels_they_may_project() {
            let interest = Interest {
                node_selector: Labels::new(),
                reads: Reads {
                    labels: Default::default(),
                    features: BTreeMap::from([("cpu.cpuid".to_owned(), FeatureReads::default())]),
                },
            };
            assert!(interest.reads_features());
            assert!(!flavor_interest().reads_features());
            let before = labels(&[("feature.node.kubernetes.io/cpu-cpuid.AVX512F", "true")]);
            let after = labels(&[]);
            assert!(affected(&interest, Some(&before), Some(&after)));
            assert!(!affected(&flavor_interest(), Some(&before), Some(&after)));
        }
    }
}
