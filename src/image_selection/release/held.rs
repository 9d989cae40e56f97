//! What the release controller keeps of a pod carrying the held label: its identity, the pod
//! contract's labels and annotations (and ocifit's), and what the planner reads of its spec, by
//! the shared floor's one trim ([`crate::cluster::held`]). Pure.

use k8s_openapi::api::core::v1::Pod;

use crate::api::pod::MIRROR_ANNOTATION;
use crate::cluster::held::{self, Kept, Keys, Spec};

/// Label and annotation prefixes the planner and the release read.
const READ_PREFIXES: &[&str] = &[
    "oci.image.compatibilities.selection/",
    "ocifit.io/",
    "selection.ocifit.io/",
    MIRROR_ANNOTATION,
];

const KEPT: Kept = Kept {
    labels: Keys::Prefixed(READ_PREFIXES),
    annotations: Keys::Prefixed(READ_PREFIXES),
    spec: Spec::Scheduling,
};

/// Keeps of `pod` only what the planner reads.
pub fn trim(pod: &mut Pod) {
    held::trim(pod, &KEPT);
}
