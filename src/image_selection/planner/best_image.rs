//! The image for a pod's candidate node classes, read from the policy's status: one image for
//! all, the best image to pin to, the fallback, or why none. Owns the best-image rule and the
//! messages naming classes; knows nothing of pods, patches or how classes are drawn.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::index::{Candidate, Grouping};
use super::policy_choice::Choice;
use super::{ClassRow, Decision, DenyReason, NoFit};
use crate::api::{ClassStatus, OnNoMatch, OnUnpinned};

/// Names of a class's nodes shown in messages before "and N more".
const NODES_SHOWN: usize = 3;

/// The decision for the pod's candidate classes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BestImage {
    /// Give the pod `image`; it may run on `classes` (indexes in the grouping).
    Image {
        image: String,
        classes: Vec<usize>,
        decision: Decision,
        /// Candidate classes the pod is pinned away from (empty unless pinned).
        excluded: Vec<usize>,
    },
    /// Admit unchanged (`onNoMatch: Allow`).
    Allow(NoFit),
}

/// Decides the image for `candidates` (not empty) under the chosen policy.
pub(super) fn decide(
    choice: &Choice<'_>,
    grouping: &Grouping,
    candidates: &[Candidate],
) -> Result<BestImage, DenyReason> {
    let entry = choice.entry;
    let policy = entry.name();
    let rows: Vec<(Candidate, &ClassStatus)> = candidates
        .iter()
        .map(|candidate| {
            let row = entry
                .rows
                .get(candidate.class)
                .copied()
                .flatten()
                .and_then(|at| entry.policy.status.as_ref()?.classes.get(at));
            row.map(|row| (*candidate, row)).ok_or_else(|| {
                let class = &grouping.classes[candidate.class];
                DenyReason::PolicyNotReady {
                    policy: policy.to_owned(),
                    missing_class: Some((class.name.clone(), shown(&class.nodes))),
                }
            })
        })
        .collect::<Result<_, _>>()?;
    let name = |c: &Candidate| grouping.classes[c.class].name.as_str();
    let mut by_image: BTreeMap<&str, Vec<(Candidate, &ClassStatus)>> = BTreeMap::new();
    for (candidate, row) in &rows {
        if let Some(image) = row.image.as_deref() {
            by_image.entry(image).or_default().push((*candidate, row));
        }
    }
    let all: Vec<usize> = rows.iter().map(|(c, _)| c.class).collect();
    let best = by_image.iter().max_by_key(|(_, classes)| {
        let covered: usize = classes.iter().map(|(c, _)| c.nodes).sum();
        let (weight, first) = classes
            .iter()
            .map(|(c, row)| (row.matched.as_ref().map_or(i32::MIN, |m| m.weight), name(c)))
            .max_by_key(|(weight, name)| (*weight, Reverse(*name)))
            .unwrap_or((i32::MIN, ""));
        (covered, weight, Reverse(first))
    });
    let Some((image, chosen)) = best else {
        return no_match(choice, &rows, name);
    };
    let image = (*image).to_owned();
    if chosen.len() == rows.len() {
        return Ok(BestImage::Image {
            image,
            classes: all,
            decision: Decision::Selected,
            excluded: Vec::new(),
        });
    }
    if entry.policy.spec.on_unpinned == OnUnpinned::Deny {
        return Err(DenyReason::Unpinned {
            policy: policy.to_owned(),
            classes: rows
                .iter()
                .map(|(candidate, row)| ClassRow {
                    class: name(candidate).to_owned(),
                    image: row.image.clone(),
                    nodes: candidate.nodes,
                })
                .collect(),
        });
    }
    let classes: Vec<usize> = chosen.iter().map(|(c, _)| c.class).collect();
    let excluded = all.into_iter().filter(|c| !classes.contains(c)).collect();
    Ok(BestImage::Image {
        image,
        classes,
        decision: Decision::Pinned,
        excluded,
    })
}

/// No candidate class has a compatible image: the fallback image, else `onNoMatch`.
fn no_match<'r>(
    choice: &Choice<'_>,
    rows: &[(Candidate, &ClassStatus)],
    name: impl Fn(&Candidate) -> &'r str,
) -> Result<BestImage, DenyReason> {
    let spec = &choice.entry.policy.spec;
    if let Some(fallback) = &spec.fallback_image {
        return Ok(BestImage::Image {
            image: fallback.clone(),
            classes: rows.iter().map(|(c, _)| c.class).collect(),
            decision: Decision::Fallback,
            excluded: Vec::new(),
        });
    }
    let no_fit = NoFit {
        policy: choice.entry.name().to_owned(),
        classes: rows
            .iter()
            .map(|(candidate, row)| {
                let reason = row.reason.as_deref().unwrap_or("no compatible image");
                (name(candidate).to_owned(), reason.to_owned())
            })
            .collect(),
    };
    match spec.on_no_match {
        OnNoMatch::Deny => Err(DenyReason::NoMatch(no_fit)),
        OnNoMatch::Allow => Ok(BestImage::Allow(no_fit)),
    }
}

/// The first few node names, then how many more.
pub(super) fn shown(names: &[String]) -> String {
    let mut out = names
        .iter()
        .take(NODES_SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NODES_SHOWN {
        let _ = write!(out, " and {} more", names.len() - NODES_SHOWN);
    }
    format!("nodes {out}")
}
