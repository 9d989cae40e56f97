//! Pinning with the node labels each architecture requires (`requireNodeLabels`): the pod's
//! platforms grouped by the labels their architecture asks for, each group's os, arch and labels
//! ANDed into the pod's required node affinity. One group is ANDed into every term. Several groups
//! are an OR, which Kubernetes lets a gated pod have only when it has no required terms of its own
//! (otherwise terms may only be narrowed): such a pod gets one term per group; a pod with its own
//! terms is narrowed to one group (most architectures, then first by name, that its requirements
//! allow), never to every group's labels at once, and a warning says which architectures it lost.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Affinity, PodSpec};

use super::{describe, requirements};
use crate::classes::{SelectionError, narrow};
use crate::placement::planner::platforms::Common;
use crate::placement::planner::policy::Policy;

/// The pod's new affinity and what it allows.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pinned {
    pub affinity: Affinity,
    /// The architectures the pod may land on.
    pub architectures: BTreeSet<String>,
    /// The requirements, for the decision's message.
    pub description: String,
    /// Why some architectures were left out (a warning), when they were.
    pub narrowed: Option<String>,
}

/// The platforms of `common` grouped by the node labels their architecture requires; the
/// groups with most architectures first, then by their first architecture.
fn groups(common: &Common, policy: &Policy) -> Vec<(BTreeMap<String, String>, Common)> {
    let mut by_labels: BTreeMap<BTreeMap<String, String>, BTreeSet<String>> = BTreeMap::new();
    for os_arch in common.os_arches() {
        let labels = policy
            .architectures
            .get(&os_arch.architecture)
            .map(|settings| settings.required_labels.clone())
            .unwrap_or_default();
        by_labels
            .entry(labels)
            .or_default()
            .insert(os_arch.architecture.clone());
    }
    let mut groups: Vec<(BTreeMap<String, String>, BTreeSet<String>)> =
        by_labels.into_iter().collect();
    groups.sort_by(|(_, a), (_, b)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    groups
        .into_iter()
        .filter_map(|(labels, arches)| {
            let platforms = common.retain(|os_arch| arches.contains(&os_arch.architecture))?;
            Some((labels, platforms))
        })
        .collect()
}

/// The os, arch and label requirements of one group.
fn required(
    labels: &BTreeMap<String, String>,
    platforms: &Common,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut required = requirements(platforms.os_arches());
    for (key, value) in labels {
        required
            .entry(key.clone())
            .or_default()
            .insert(value.clone());
    }
    required
}

fn architectures(platforms: &Common) -> BTreeSet<String> {
    platforms
        .os_arches()
        .map(|os_arch| os_arch.architecture.clone())
        .collect()
}

fn has_own_terms(spec: &PodSpec) -> bool {
    spec.affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|selector| !selector.node_selector_terms.is_empty())
}

/// Pins the pod to `common` with each architecture's required labels; `None` when its own
/// requirements allow none of it.
pub(super) fn pin(
    spec: &PodSpec,
    common: &Common,
    policy: &Policy,
) -> Result<Option<Pinned>, SelectionError> {
    let groups = groups(common, policy);
    let narrow_to = |labels: &BTreeMap<String, String>, platforms: &Common| {
        let required = required(labels, platforms);
        narrow(
            spec.affinity.as_ref(),
            spec.node_selector.as_ref(),
            &required,
        )
        .map(|narrowed| (narrowed, describe(&required)))
    };
    if groups.len() > 1 && !has_own_terms(spec) {
        return any_of(&groups, narrow_to);
    }
    for (labels, platforms) in &groups {
        let (narrowed, description) = narrow_to(labels, platforms)?;
        if !narrowed.satisfiable {
            continue;
        }
        let kept = architectures(platforms);
        let lost: Vec<String> = architectures(common).difference(&kept).cloned().collect();
        let warning = (!lost.is_empty()).then(|| {
            format!(
                "the pod could also run on {} but those architectures require other node \
                 labels, and a pod with required node affinity of its own can only be narrowed \
                 (each of its terms ANDed with one set of labels), never given an alternative: \
                 placed on {} only",
                lost.join(", "),
                kept.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        });
        return Ok(Some(Pinned {
            affinity: narrowed.affinity,
            architectures: kept,
            description,
            narrowed: warning,
        }));
    }
    Ok(None)
}

/// A pod without required terms of its own: one new term per group (any of them).
fn any_of(
    groups: &[(BTreeMap<String, String>, Common)],
    narrow_to: impl Fn(
        &BTreeMap<String, String>,
        &Common,
    ) -> Result<(crate::classes::Narrowed, String), SelectionError>,
) -> Result<Option<Pinned>, SelectionError> {
    let mut affinity: Option<Affinity> = None;
    let mut terms = Vec::new();
    let mut kept = BTreeSet::new();
    let mut descriptions = Vec::new();
    for (labels, platforms) in groups {
        let (narrowed, description) = narrow_to(labels, platforms)?;
        if !narrowed.satisfiable {
            continue;
        }
        let term = narrowed
            .affinity
            .node_affinity
            .as_ref()
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|selector| selector.node_selector_terms.clone())
            .unwrap_or_default();
        terms.extend(term);
        kept.extend(architectures(platforms));
        descriptions.push(format!("({description})"));
        affinity.get_or_insert(narrowed.affinity);
    }
    let Some(mut affinity) = affinity else {
        return Ok(None);
    };
    if let Some(selector) = affinity.node_affinity.as_mut().and_then(|n| {
        n.required_during_scheduling_ignored_during_execution
            .as_mut()
    }) {
        selector.node_selector_terms = terms;
    }
    Ok(Some(Pinned {
        affinity,
        architectures: kept,
        description: descriptions.join(" or "),
        narrowed: None,
    }))
}
