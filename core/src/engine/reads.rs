//! What an artifact's rules read from a node, for grouping nodes into classes and for the
//! policy status's `classKeys`. Plain data.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What an artifact's rules read from a node: the values that distinguish node classes. Part of
/// the policy status (`classKeys`), so the webhook groups nodes exactly as the controller did
/// without the artifact at hand.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reads {
    /// Node label keys (ocifit rules).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub labels: BTreeSet<String>,
    /// NFD features by name (NFD rules).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub features: BTreeMap<String, FeatureReads>,
}

/// What NFD rules read of one feature. Whether the feature exists (and as flags, attributes or
/// instances) is always read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureReads {
    /// Element names read by `matchExpressions` (their presence and value, in every instance).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub elements: BTreeSet<String>,
    /// A `matchName` reads the whole set of element names of the feature.
    #[serde(default)]
    pub names: bool,
}

impl Reads {
    /// Adds what `other` reads (candidates mode: the union over every candidate's artifact).
    pub fn extend(&mut self, other: &Reads) {
        self.labels.extend(other.labels.iter().cloned());
        for (feature, reads) in &other.features {
            let mine = self.features.entry(feature.clone()).or_default();
            mine.elements.extend(reads.elements.iter().cloned());
            mine.names |= reads.names;
        }
    }
}
