//! The compatibility engine: parses compatibility artifacts (ocifit JSON, NFD image-compatibility
//! v1alpha1) into one compiled model and decides which candidate image fits a node's labels and
//! features, explaining every set it looked at. Pure: no I/O, no async, no clock, no Kubernetes
//! client. It must not fetch artifacts (the registry room does), list nodes (the controller does)
//! or group nodes (the `classes` room does, from [`Artifact::reads`]).
//!
//! The exact semantics of both formats are in `reference/compat-formats.md`; where the two formats
//! differ (NotIn on a missing key, non-integer node values, operator sets), each keeps its own.

mod artifact;
mod doc;
mod error;
mod explain;
mod inputs;
mod limits;
mod nfd;
mod nfd_eval;
mod ocifit;
mod op;
mod select;
mod value;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use artifact::Artifact;

pub use artifact::CompatSet;
pub use error::{ArtifactError, Location, Problem};
pub use explain::{Chosen, Explanation, Mode, SetOutcome, SetRef, SetStatus};
pub use inputs::{
    FEATURE_LABEL_PREFIX, FeatureSource, Features, NODE_NAME_LABEL, NodeFeature, NodeFeatureList,
    NodeFeatureSpec, NodeInputs, features_by_node,
};
pub use inputs::{FeatureReads, Reads};
pub use limits::{LIMITS, Limits};
pub use select::{Candidate, any_platform, best_candidate};

/// Media type of the layer holding an ocifit compatibility artifact (JSON).
pub const OCIFIT_LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.compatibilities.v1+json";
/// Manifest `artifactType` of an NFD image-compatibility artifact.
pub const NFD_ARTIFACT_TYPE: &str = "application/vnd.nfd.image-compatibility.v1alpha1";
/// Media type of the layer holding an NFD image-compatibility spec (YAML; JSON also parses).
pub const NFD_LAYER_MEDIA_TYPE: &str = "application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml";

/// The two artifact formats the engine reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// compspec/ocifit-k8s JSON: rules read node labels.
    Ocifit,
    /// Node Feature Discovery image-compatibility v1alpha1: rules read NFD features.
    Nfd,
}

impl Format {
    /// The name used on the command line and in status (`ocifit` or `nfd`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Ocifit => "ocifit",
            Format::Nfd => "nfd",
        }
    }

    /// For local files only (registry content is dispatched on media type): decides the format
    /// from the first evidence in document order (a `matchExpressions` list or map, an NFD-only
    /// field), else JSON is ocifit and YAML NFD, and says why in one sentence.
    pub fn detect(bytes: &[u8]) -> Result<(Format, &'static str), ArtifactError> {
        doc::detect(bytes)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text given for a format is neither `ocifit` nor `nfd`.
#[derive(Debug, thiserror::Error)]
#[error("unknown artifact format {0:?}: expected \"ocifit\" or \"nfd\"")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ocifit" => Ok(Format::Ocifit),
            "nfd" => Ok(Format::Nfd),
            other => Err(UnknownFormat(other.to_owned())),
        }
    }
}
