//! The policy status as a pure function: artifact (or why there is none) + node inventory +
//! platform lookups already done + previous status + now → new status and the Events its
//! transitions deserve. No client, no registry, no clock: the reconciler gathers the inputs and
//! applies the result. Nothing here may depend on when it runs except through `now`, and `now` is
//! only written where something changed, so a pass with nothing new yields the previous status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::platform::{Platforms, runs_on};
use crate::api::{
    ArtifactStatus, ClassMatch, ClassStatus, ConditionType, ImageSelectionPolicySpec,
    ImageSelectionPolicyStatus, Reason,
};
use crate::engine::{Artifact, Format, NodeInputs, SetStatus};
use crate::resolution::{Choice, ResolvedClass, resolve};

/// A parsed artifact and where it came from.
#[derive(Debug)]
pub struct Resolved {
    /// The artifact manifest's digest.
    pub digest: String,
    /// Its format (from the layer's media type).
    pub format: Format,
    /// The parsed artifact.
    pub artifact: Artifact,
}

/// Why the current artifact cannot be had: the condition reason and the registry's or engine's
/// message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The condition reason.
    pub reason: Reason,
    /// What went wrong, as the registry or engine said it.
    pub message: String,
}

/// The artifact side of the inputs.
#[derive(Clone, Copy, Debug)]
pub enum ArtifactState<'a> {
    /// The current artifact was fetched and parsed.
    Current(&'a Resolved),
    /// It could not be; `last_good` is the last artifact that could (in this process), if any.
    Failed {
        failure: &'a Failure,
        last_good: Option<&'a Resolved>,
    },
}

/// Everything the status is computed from.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The policy's `metadata.generation`.
    pub generation: Option<i64>,
    /// The policy's spec.
    pub spec: &'a ImageSelectionPolicySpec,
    /// The artifact, or why there is none.
    pub artifact: ArtifactState<'a>,
    /// Every node (name, labels and NFD features); the policy's nodeSelector is applied here.
    pub nodes: &'a [(String, NodeInputs)],
    /// The platforms of every candidate image (see [`images_to_check`]).
    pub platforms: &'a Platforms,
    /// The status as stored now.
    pub previous: Option<&'a ImageSelectionPolicyStatus>,
    /// The time written where something changes.
    pub now: &'a Time,
}

/// Whether an Event reports something normal or something to look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Resolved, recovered, updated.
    Normal,
    /// Failed, stale, no match.
    Warning,
}

/// An Event to publish on the policy, for one transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub kind: EventKind,
    /// The condition reason that changed.
    pub reason: Reason,
    /// What changed, for people.
    pub note: String,
}

/// The new status and the Events its transitions deserve (none when nothing changed).
#[derive(Clone, Debug, PartialEq)]
pub struct Computed {
    /// The status to apply.
    pub status: ImageSelectionPolicyStatus,
    /// Events for the transitions from the previous status.
    pub events: Vec<Event>,
}

/// The candidate images whose platforms the status needs: every distinct, non-empty set tag.
pub fn images_to_check(artifact: &Artifact) -> Vec<String> {
    let mut images: Vec<String> = artifact
        .sets()
        .iter()
        .map(|set| set.tag().to_owned())
        .filter(|tag| !tag.is_empty())
        .collect();
    images.sort();
    images.dedup();
    images
}

/// Computes the status for `inputs`.
pub fn compute(inputs: &Inputs<'_>) -> Computed {
    let previous = inputs.previous;
    let serving = match inputs.artifact {
        ArtifactState::Current(resolved) => Some(resolved),
        ArtifactState::Failed { last_good, .. } => last_good,
    };
    let mut status = ImageSelectionPolicyStatus {
        observed_generation: inputs.generation,
        ..ImageSelectionPolicyStatus::default()
    };
    let classes = match serving {
        Some(resolved) => {
            status.artifact = Some(artifact_status(resolved, previous, inputs.now));
            status.class_keys = Some(resolved.artifact.reads());
            let resolved_classes = resolve(
                Choice::Sets(&resolved.artifact),
                &inputs.spec.node_selector,
                inputs
                    .nodes
                    .iter()
                    .map(|(name, node)| (name.as_str(), node)),
                |class, image| runs_on(class, image, inputs.platforms),
            );
            Some(resolved_classes.iter().map(class_row).collect())
        }
        // Nothing to evaluate in this process: keep what the stored status serves (last known
        // good after a restart during an outage), or nothing.
        None => previous.map(|p| {
            status.artifact.clone_from(&p.artifact);
            status.class_keys.clone_from(&p.class_keys);
            p.classes.clone()
        }),
    };
    status.classes = classes.unwrap_or_default();
    status.class_count = i32::try_from(status.classes.len()).unwrap_or(i32::MAX);
    status.conditions = conditions(inputs, &status);
    let events = events(previous, &status);
    Computed { status, events }
}

fn artifact_status(
    resolved: &Resolved,
    previous: Option<&ImageSelectionPolicyStatus>,
    now: &Time,
) -> ArtifactStatus {
    let earlier = previous
        .and_then(|p| p.artifact.as_ref())
        .filter(|a| a.digest == resolved.digest);
    ArtifactStatus {
        digest: resolved.digest.clone(),
        format: resolved.format,
        candidates: i32::try_from(resolved.artifact.sets().len()).unwrap_or(i32::MAX),
        fetched_at: match earlier {
            Some(a) => a.fetched_at.clone(),
            None => Some(now.clone()),
        },
    }
}

fn class_row(resolved: &ResolvedClass) -> ClassStatus {
    let explanation = &resolved.explanation;
    let mut reason = explanation.summary();
    if explanation.chosen.is_some() {
        let skipped: Vec<String> = explanation
            .sets
            .iter()
            .filter(|s| s.status == SetStatus::Skipped)
            .map(|s| {
                format!(
                    "skipped set {} ({:?}): {}",
                    s.index,
                    s.tag,
                    s.reason
                        .as_deref()
                        .unwrap_or("refused by the platform check")
                )
            })
            .collect();
        if !skipped.is_empty() {
            reason = format!("{reason}; {}", skipped.join("; "));
        }
    }
    ClassStatus {
        name: resolved.class.name.clone(),
        labels: resolved.class.labels.clone(),
        nodes: i32::try_from(resolved.class.nodes.len()).unwrap_or(i32::MAX),
        image: resolved.image().map(str::to_owned),
        matched: explanation.chosen.as_ref().map(|c| ClassMatch {
            index: i32::try_from(c.index).unwrap_or(i32::MAX),
            tag: c.tag.clone(),
            weight: c.weight,
            description: c.description.clone(),
        }),
        reason: Some(reason),
    }
}

/// One condition's new value, before merging with the previous one.
struct Wanted {
    type_: ConditionType,
    status: bool,
    reason: Reason,
    message: String,
}

fn conditions(inputs: &Inputs<'_>, status: &ImageSelectionPolicyStatus) -> Vec<Condition> {
    let serving = status.artifact.as_ref().map(|a| a.digest.as_str());
    let (resolved, degraded, stale) = match (inputs.artifact, serving) {
        (ArtifactState::Current(current), _) => (
            Wanted {
                type_: ConditionType::ArtifactResolved,
                status: true,
                reason: Reason::Fetched,
                message: format!(
                    "{} artifact {} with {} candidate sets",
                    current.format,
                    current.digest,
                    current.artifact.sets().len()
                ),
            },
            Wanted {
                type_: ConditionType::Degraded,
                status: false,
                reason: Reason::Current,
                message: "the status reflects the current artifact".to_owned(),
            },
            None,
        ),
        (ArtifactState::Failed { failure, .. }, Some(digest)) => (
            failed(failure),
            Wanted {
                type_: ConditionType::Degraded,
                status: true,
                reason: Reason::StaleArtifact,
                message: format!(
                    "serving the last known good artifact {digest}: {}",
                    failure.message
                ),
            },
            Some(digest),
        ),
        (ArtifactState::Failed { failure, .. }, None) => (
            failed(failure),
            Wanted {
                type_: ConditionType::Degraded,
                status: false,
                reason: failure.reason,
                message: "no artifact was ever resolved, so there is nothing to serve".to_owned(),
            },
            None,
        ),
    };
    let ready = match (inputs.artifact, stale) {
        (ArtifactState::Failed { .. }, Some(digest)) => Wanted {
            type_: ConditionType::Ready,
            status: false,
            reason: Reason::StaleArtifact,
            message: format!(
                "images are served from the last known good artifact {digest}; the current one cannot be had"
            ),
        },
        (ArtifactState::Failed { failure, .. }, None) => Wanted {
            type_: ConditionType::Ready,
            status: false,
            reason: failure.reason,
            message: format!("no artifact: {}", failure.message),
        },
        (ArtifactState::Current(_), _) => ready(inputs.spec, &status.classes),
    };
    let previous = inputs
        .previous
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    [ready, resolved, degraded]
        .into_iter()
        .map(|wanted| merge(previous, wanted, inputs.generation, inputs.now))
        .collect()
}

fn failed(failure: &Failure) -> Wanted {
    Wanted {
        type_: ConditionType::ArtifactResolved,
        status: false,
        reason: failure.reason,
        message: failure.message.clone(),
    }
}

fn ready(spec: &ImageSelectionPolicySpec, classes: &[ClassStatus]) -> Wanted {
    let wanted = |status, reason, message| Wanted {
        type_: ConditionType::Ready,
        status,
        reason,
        message,
    };
    if classes.is_empty() {
        let which = if spec.node_selector.is_empty() {
            "no node except control-plane nodes exists".to_owned()
        } else {
            let selector: Vec<String> = spec
                .node_selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("no node matches the nodeSelector {}", selector.join(","))
        };
        return wanted(false, Reason::NoNodes, which);
    }
    let unmatched: Vec<&str> = classes
        .iter()
        .filter(|c| c.image.is_none())
        .map(|c| c.name.as_str())
        .collect();
    if unmatched.is_empty() {
        return wanted(
            true,
            Reason::Resolved,
            format!("all {} node classes have an image", classes.len()),
        );
    }
    let names = unmatched.join(", ");
    match (&spec.fallback_image, spec.on_no_match) {
        (Some(fallback), _) => wanted(
            true,
            Reason::NoMatch,
            format!(
                "no compatible image for node classes {names}; their pods get the fallback image {fallback}"
            ),
        ),
        (None, crate::api::OnNoMatch::Allow) => wanted(
            true,
            Reason::NoMatch,
            format!(
                "no compatible image for node classes {names}; their pods are admitted unchanged (onNoMatch: Allow)"
            ),
        ),
        (None, crate::api::OnNoMatch::Deny) => wanted(
            false,
            Reason::NoMatch,
            format!(
                "no compatible image for node classes {names}; their pods are denied (onNoMatch: Deny)"
            ),
        ),
    }
}

/// The condition with `lastTransitionTime` kept unless its status flips.
fn merge(previous: &[Condition], wanted: Wanted, generation: Option<i64>, now: &Time) -> Condition {
    let status = if wanted.status { "True" } else { "False" };
    let earlier = previous.iter().find(|c| c.type_ == wanted.type_.as_str());
    let last_transition_time = match earlier {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    Condition {
        type_: wanted.type_.as_str().to_owned(),
        status: status.to_owned(),
        reason: wanted.reason.as_str().to_owned(),
        message: wanted.message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Events for what changed: a condition whose status or reason moved, and a new artifact digest.
fn events(
    previous: Option<&ImageSelectionPolicyStatus>,
    status: &ImageSelectionPolicyStatus,
) -> Vec<Event> {
    let before: BTreeMap<&str, &Condition> = previous
        .map(|p| p.conditions.iter().map(|c| (c.type_.as_str(), c)).collect())
        .unwrap_or_default();
    let mut events = Vec::new();
    for condition in &status.conditions {
        let earlier = before.get(condition.type_.as_str());
        let unchanged =
            earlier.is_some_and(|b| b.status == condition.status && b.reason == condition.reason);
        let Some(reason) = reason_from(&condition.reason) else {
            continue;
        };
        let good = condition.status == "True";
        let kind = if condition.type_ == ConditionType::Degraded.as_str() {
            // Degraded is news when it turns on, and when it turns off again; a first
            // `Degraded=False` says nothing.
            let was_on = earlier.is_some_and(|b| b.status == "True");
            match (good, was_on) {
                (true, _) if !unchanged => EventKind::Warning,
                (false, true) => EventKind::Normal,
                _ => continue,
            }
        } else if unchanged {
            continue;
        } else if good {
            EventKind::Normal
        } else {
            EventKind::Warning
        };
        events.push(Event {
            kind,
            reason,
            note: format!(
                "{} is {}: {}",
                condition.type_, condition.status, condition.message
            ),
        });
    }
    let old_digest = previous
        .and_then(|p| p.artifact.as_ref())
        .map(|a| a.digest.as_str());
    if let (Some(old), Some(new)) = (old_digest, status.artifact.as_ref())
        && old != new.digest
    {
        events.push(Event {
            kind: EventKind::Normal,
            reason: Reason::Fetched,
            note: format!("the artifact changed from {old} to {}", new.digest),
        });
    }
    events
}

fn reason_from(text: &str) -> Option<Reason> {
    Reason::ALL.iter().copied().find(|r| r.as_str() == text)
}

#[cfg(test)]
mod tests;
