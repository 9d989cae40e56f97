//! The release planner: what the controller does with a gated pod once its images were looked
//! at. Its answer is the pod after ONE update: released (gate removed; when constrained,
//! `kubernetes.io/os` and `kubernetes.io/arch` ANDed into every required term, the policy's
//! preferences and tolerations added; decision annotations written), or held (gate kept, the
//! reason written), or still trying (attempts recorded) — with the Events to emit and when to look
//! again. Pure: inspection results and the time since the pod's creation are passed in.

mod labels;
mod pod_edits;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::failure::{LONGEST_RETRY, Step, after_failure};
use super::platforms::{Common, ContainerImage, intersect};
use super::policy::{GiveUp, Policy};
use crate::api::NoCommonPlatform;
use crate::api::placement_pod::{ATTEMPTS_ANNOTATION, Outcome};
use crate::classes::{ARCH_LABEL, OS_LABEL};
use crate::classes::{Placement, SelectionError, narrow};
use crate::platform::{OsArch, Platform};

/// The OS tried first when a pod's platforms span several operating systems whose architectures
/// differ (node affinity cannot say "linux/arm64 or windows/amd64" in one term).
const PREFERRED_OS: &str = "linux";

/// What inspecting one container's image gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inspection {
    /// The container's name.
    pub container: String,
    /// The image as the pod names it.
    pub image: String,
    /// Its digest and platforms, or why not.
    pub result: Result<Inspected, InspectionFailure>,
}

/// Why an image was not inspected, as the pod's Events and annotations say it: the kind of
/// failure only (the whole error is in ocifit's log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InspectionFailure {
    /// The pod names something that is no image reference (the pod's own text, clipped).
    #[error("{0}")]
    InvalidReference(String),
    /// The registry was not asked or did not answer with the image.
    #[error("image {image}: {summary}")]
    Lookup { image: String, summary: String },
}

/// A successfully inspected image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inspected {
    pub digest: String,
    pub platforms: Vec<Platform>,
}

/// An Event to emit on the pod (and its owner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The controller's answer for one gated pod.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReleasePlan {
    /// The pod after the one update to make (equal to the input: nothing to write).
    pub pod: Pod,
    /// What was decided; `None` while inspection is still being retried.
    pub outcome: Option<Outcome>,
    /// When to look at the pod again (it is still gated).
    pub requeue: Option<Duration>,
    pub events: Vec<Note>,
}

/// What the planner needs besides the pod.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReleaseInputs<'a> {
    /// The policy named by the pod's tracking label.
    pub policy: &'a Policy,
    /// Architectures whose nodes ocifit taints (all policies' node tainting together).
    pub tainted: &'a BTreeSet<String>,
    /// Time since the pod was created.
    pub since_creation: Duration,
}

/// The pull policy of a container the kubelet never pulls an image for.
const NEVER_PULLED: &str = "Never";

/// Every container whose image is inspected, init containers first. Ephemeral containers come
/// after scheduling, and one with `imagePullPolicy: Never` runs whatever image its node has, so
/// neither constrains anything.
pub(crate) fn containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .filter(|container| container.image_pull_policy.as_deref() != Some(NEVER_PULLED))
}

/// Plans the update of `pod` given the `inspections` of its containers' images.
pub(crate) fn plan_release(
    pod: &Pod,
    inspections: &[Inspection],
    context: ReleaseInputs<'_>,
) -> ReleasePlan {
    if inspections.is_empty() {
        // Every container runs what its node has: nothing to narrow, and nothing went wrong.
        let mut plan = unconstrained(
            pod,
            inspections,
            "no container's image is pulled (every one has imagePullPolicy: Never); released \
             without a platform constraint"
                .to_owned(),
        );
        for note in &mut plan.events {
            note.warning = false;
        }
        return plan;
    }
    let failures: Vec<(&Inspection, &InspectionFailure)> = inspections
        .iter()
        .filter_map(|inspection| Some((inspection, inspection.result.as_ref().err()?)))
        .collect();
    if !failures.is_empty() {
        return after_inspection_failure(pod, inspections, &failures, context);
    }
    let containers: Vec<ContainerImage<'_>> = inspections
        .iter()
        .filter_map(|inspection| {
            Some(ContainerImage {
                name: &inspection.container,
                platforms: &inspection.result.as_ref().ok()?.platforms,
            })
        })
        .collect();
    let common = match intersect(&containers) {
        Ok(common) => common,
        Err(disagreement) => {
            return no_common_platform(pod, inspections, disagreement.to_string(), context);
        }
    };
    match constrain(pod, inspections, &common, context) {
        Ok(plan) => plan,
        Err(why) => no_common_platform(pod, inspections, why.to_string(), context),
    }
}

/// The plan for a gated pod whose policy is gone (deleted, or no longer usable): a gate is
/// never left behind, so the pod is released without a platform constraint, saying why.
pub(crate) fn without_policy(pod: &Pod, why: &str) -> ReleasePlan {
    unconstrained(
        pod,
        &[],
        format!("{why}; released without a platform constraint"),
    )
}

/// Why a pod's own requirements leave none of the platforms its containers share.
#[derive(Debug, thiserror::Error)]
enum Unconstrainable {
    #[error("the pod asks for spec.os.name {os}, but its containers share only {common}")]
    OsNotShared { os: String, common: String },
    #[error(transparent)]
    Requirements(#[from] SelectionError),
    #[error(
        "the pod's own node requirements ({own}) allow none of the platforms its containers share ({common})"
    )]
    NoneAllowed { own: String, common: String },
}

/// Releases `pod` constrained to `common`, or says why its own requirements forbid it.
fn constrain(
    pod: &Pod,
    inspections: &[Inspection],
    common: &Common,
    context: ReleaseInputs<'_>,
) -> Result<ReleasePlan, Unconstrainable> {
    let spec = pod.spec.clone().unwrap_or_default();
    let pod_os = spec.os.as_ref().map(|os| os.name.as_str());
    let choices = match pod_os {
        Some(os) => vec![common.retain(|os_arch| os_arch.os == os).ok_or_else(|| {
            Unconstrainable::OsNotShared {
                os: os.to_owned(),
                common: common.to_string(),
            }
        })?],
        None => os_choices(common),
    };
    // The first choice the pod's own requirements leave a node for.
    let mut chosen = None;
    for choice in &choices {
        if let Some(pinned) = labels::pin(&spec, choice, context.policy)? {
            chosen = Some((choice, pinned));
            break;
        }
    }
    let Some((narrowed_os, pinned)) = chosen else {
        let own = Placement::from_pod_spec(&spec)
            .map(|placement| placement.to_string())
            .unwrap_or_else(|err: SelectionError| err.to_string());
        return Err(Unconstrainable::NoneAllowed {
            own,
            common: common.to_string(),
        });
    };
    let architectures: BTreeSet<&str> = pinned.architectures.iter().map(String::as_str).collect();
    let placed = narrowed_os
        .retain(|os_arch| architectures.contains(os_arch.architecture.as_str()))
        .unwrap_or_else(|| narrowed_os.clone());
    let message = format!(
        "every container runs on {narrowed_os}: required node affinity now asks for {}",
        pinned.description
    );
    let mut updated = pod.clone();
    pod_edits::release(&mut updated);
    pod_edits::constrain(&mut updated, pinned.affinity, &architectures, context);
    pod_edits::decision(
        &mut updated,
        Outcome::Constrained,
        Some(&placed.to_string()),
        inspections,
        &message,
    );
    let mut events = vec![Note {
        warning: false,
        reason: "Placed",
        message,
    }];
    if let Some(warning) = pinned.narrowed {
        events.push(Note {
            warning: true,
            reason: "ArchitecturesNarrowed",
            message: warning,
        });
    }
    Ok(ReleasePlan {
        pod: updated,
        outcome: Some(Outcome::Constrained),
        requeue: None,
        events,
    })
}

/// The platforms to require, in order of preference. One node affinity term cannot say
/// "linux/arm64 or windows/amd64", so operating systems with different architectures are required
/// one at a time, linux first; when every OS has the same architectures, all at once.
fn os_choices(common: &Common) -> Vec<Common> {
    let oses: BTreeSet<&str> = common.os_arches().map(|p| p.os.as_str()).collect();
    let arches: BTreeSet<&str> = common
        .os_arches()
        .map(|p| p.architecture.as_str())
        .collect();
    if oses.len() * arches.len() == common.os_arches().count() {
        return vec![common.clone()];
    }
    let mut ordered: Vec<&str> = oses.into_iter().collect();
    ordered.sort_by_key(|os| (*os != PREFERRED_OS, *os));
    ordered
        .into_iter()
        .filter_map(|os| common.retain(|os_arch| os_arch.os == os))
        .collect()
}

/// `kubernetes.io/os In [...]` and `kubernetes.io/arch In [...]` for the platforms.
fn requirements<'a>(
    platforms: impl Iterator<Item = &'a OsArch>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut required: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for platform in platforms {
        required
            .entry(OS_LABEL.to_owned())
            .or_default()
            .insert(platform.os.clone());
        required
            .entry(ARCH_LABEL.to_owned())
            .or_default()
            .insert(platform.architecture.clone());
    }
    required
}

fn describe(required: &BTreeMap<String, BTreeSet<String>>) -> String {
    required
        .iter()
        .map(|(key, values)| {
            format!(
                "{key} In [{}]",
                values.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

/// No platform suits every container (or the pod's own requirements exclude them all): hold, or
/// release unconstrained, as the policy says.
fn no_common_platform(
    pod: &Pod,
    inspections: &[Inspection],
    why: String,
    context: ReleaseInputs<'_>,
) -> ReleasePlan {
    match context.policy.no_common_platform {
        NoCommonPlatform::Hold => hold(pod, inspections, why),
        NoCommonPlatform::Release => unconstrained(
            pod,
            inspections,
            format!("{why}; released without a platform constraint (onNoCommonPlatform: Release)"),
        ),
    }
}

fn after_inspection_failure(
    pod: &Pod,
    inspections: &[Inspection],
    failures: &[(&Inspection, &InspectionFailure)],
    context: ReleaseInputs<'_>,
) -> ReleasePlan {
    let bound = &context.policy.failure;
    let failed = failed_attempts(pod).saturating_add(1);
    let errors = failures
        .iter()
        .map(|(inspection, error)| format!("container {}: {error}", inspection.container))
        .collect::<Vec<_>>()
        .join("; ");
    match after_failure(bound, failed, context.since_creation) {
        Step::RetryIn(wait) => {
            let mut updated = pod.clone();
            pod_edits::annotate(&mut updated, ATTEMPTS_ANNOTATION, &failed.to_string());
            ReleasePlan {
                pod: updated,
                outcome: None,
                requeue: Some(wait),
                events: vec![Note {
                    warning: true,
                    reason: "InspectionFailed",
                    message: format!(
                        "cannot read image platforms (attempt {failed} of at least {}): {errors}; retrying in {}s",
                        bound.attempts,
                        wait.as_secs()
                    ),
                }],
            }
        }
        Step::GiveUp(action) => {
            let why = format!("cannot read image platforms after {failed} attempts: {errors}");
            let mut plan = match action {
                GiveUp::ReleaseUnconstrained => unconstrained(
                    pod,
                    inspections,
                    format!("{why}; released without a platform constraint"),
                ),
                GiveUp::Hold => hold(pod, inspections, format!("{why}; held")),
                GiveUp::Fallback(architecture) => {
                    fallback(pod, inspections, &architecture, why, context)
                }
            };
            pod_edits::annotate(&mut plan.pod, ATTEMPTS_ANNOTATION, &failed.to_string());
            plan
        }
    }
}

fn failed_attempts(pod: &Pod) -> u32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(ATTEMPTS_ANNOTATION))
        .and_then(|count| count.parse().ok())
        .unwrap_or(0)
}

fn hold(pod: &Pod, inspections: &[Inspection], why: String) -> ReleasePlan {
    let mut updated = pod.clone();
    pod_edits::decision(&mut updated, Outcome::Held, None, inspections, &why);
    ReleasePlan {
        pod: updated,
        outcome: Some(Outcome::Held),
        requeue: Some(LONGEST_RETRY),
        events: vec![Note {
            warning: true,
            reason: "PlacementHeld",
            message: why,
        }],
    }
}

fn unconstrained(pod: &Pod, inspections: &[Inspection], why: String) -> ReleasePlan {
    let mut updated = pod.clone();
    pod_edits::release(&mut updated);
    pod_edits::decision(
        &mut updated,
        Outcome::Unconstrained,
        None,
        inspections,
        &why,
    );
    ReleasePlan {
        pod: updated,
        outcome: Some(Outcome::Unconstrained),
        requeue: None,
        events: vec![Note {
            warning: true,
            reason: "ReleasedUnconstrained",
            message: why,
        }],
    }
}

fn fallback(
    pod: &Pod,
    inspections: &[Inspection],
    architecture: &str,
    why: String,
    context: ReleaseInputs<'_>,
) -> ReleasePlan {
    let spec = pod.spec.clone().unwrap_or_default();
    let required = BTreeMap::from([(
        ARCH_LABEL.to_owned(),
        BTreeSet::from([architecture.to_owned()]),
    )]);
    let narrowed = match narrow(
        spec.affinity.as_ref(),
        spec.node_selector.as_ref(),
        &required,
    ) {
        Ok(narrowed) => narrowed,
        Err(err) => return hold(pod, inspections, format!("{why}; cannot fall back: {err}")),
    };
    let message = format!("{why}; constrained to the fallback architecture {architecture}");
    let mut updated = pod.clone();
    pod_edits::release(&mut updated);
    pod_edits::constrain(
        &mut updated,
        narrowed.affinity,
        &BTreeSet::from([architecture]),
        context,
    );
    pod_edits::decision(&mut updated, Outcome::Fallback, None, inspections, &message);
    ReleasePlan {
        pod: updated,
        outcome: Some(Outcome::Fallback),
        requeue: None,
        events: vec![Note {
            warning: true,
            reason: "FallbackArchitecture",
            message,
        }],
    }
}

#[cfg(test)]
mod tests;
