//! What both artifact targets do with a document that parses: everything the operator does with
//! an artifact (what it reads, a best fit on a few nodes), none of which may panic.

use std::collections::BTreeMap;

use ocifit::engine::{Artifact, NodeInputs, any_platform};

pub fn exercise(artifact: &Artifact) {
    let _ = artifact.reads();
    let _ = artifact.require_image_tags();
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let nodes = [
        NodeInputs::new(BTreeMap::new()),
        NodeInputs::new(labels(&[
            ("feature.node.kubernetes.io/system-os_release.ID", "ubuntu"),
            ("feature.node.kubernetes.io/kernel-version.major", "6"),
            ("k", "x"),
            ("k6", "7"),
            ("k9", "not a number"),
        ])),
    ];
    for node in &nodes {
        let _ = artifact.best_fit(node, any_platform);
    }
}
