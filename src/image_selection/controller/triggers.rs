//! Which policies a node change concerns. A policy's classes depend only on whether a node counts
//! under its nodeSelector and on the values its artifact reads (plus arch and os), so a change to
//! any other label reconciles nothing. Pure: the trackers hold the state and call these.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use crate::classes::{CONTROL_PLANE_LABELS, distinguishes, node_counts};
use crate::engine::Reads;

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
