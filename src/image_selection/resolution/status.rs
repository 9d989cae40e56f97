//! The policy status as a pure function: artifact (or why there is none) + node inventory +
//! platform lookups already done + previous status + now → new status and the Events its
//! transitions deserve (one per condition whose status or reason moved, one for a new digest).
//! No client, no registry, no clock; `now` is written only where something changed, so a pass
//! with nothing new yields the previous status. The status is cut to what etcd stores (a refused
//! status is never written): reasons, then descriptions, then classes past the bound (a class
//! left out denies its pods as not ready), `classKeys` whole or not at all ([`StatusLimits`]); a
//! `Truncated` condition says what was cut.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

mod conditions;

use super::Platforms;
use super::Resolved;
use super::resolve_classes;
use crate::api::{
    ArtifactStatus, ClassMatch, ClassStatus, ConditionType, ImageSelectionPolicySpec,
    ImageSelectionPolicyStatus, Reason,
};
use crate::engine::NodeInputs;

/// Why the current artifact cannot be had: the condition reason and the registry's or engine's
/// message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
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
pub struct StatusInputs<'a> {
    /// The policy's `metadata.generation`.
    pub generation: Option<i64>,
    pub spec: &'a ImageSelectionPolicySpec,
    /// The artifact, or why there is none.
    pub artifact: ArtifactState<'a>,
    /// Every node (name, labels and NFD features); the policy's nodeSelector is applied here.
    pub nodes: &'a [(String, NodeInputs)],
    /// The platforms of every candidate image (see `images_to_check`).
    pub platforms: &'a Platforms,
    /// The status as stored now.
    pub previous: Option<&'a ImageSelectionPolicyStatus>,
    /// The time written where something changes.
    pub now: &'a Time,
    /// How much the classes and `classKeys` may take ([`StatusLimits::MANAGED`] for a policy
    /// ocifit took charge of).
    pub limits: StatusLimits,
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

/// Computes the status for `inputs`.
pub fn policy_status(inputs: &StatusInputs<'_>) -> Computed {
    let previous = inputs.previous;
    let source = inputs.spec.artifact.source_digest();
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
            let mut artifact = artifact_status(resolved, previous, inputs.now);
            artifact.source = Some(source.clone());
            status.artifact = Some(artifact);
            status.class_keys = Some(resolved.reads());
            Some(class_rows(resolved, inputs))
        }
        // Nothing to evaluate in this process: keep what the stored status serves (last known
        // good after a restart during an outage) when it was resolved from the same source,
        // else nothing: a changed artifact never serves the previous one's images.
        None => previous.filter(|p| same_source(p, &source)).map(|p| {
            status.artifact.clone_from(&p.artifact);
            status.class_keys.clone_from(&p.class_keys);
            p.classes.clone()
        }),
    };
    status.classes = classes.unwrap_or_default();
    status.class_count = i32::try_from(status.classes.len()).unwrap_or(i32::MAX);
    let cut = bound_status(&mut status, inputs.limits);
    status.conditions = conditions::conditions(inputs, &status, cut);
    let events = events(previous, &status);
    Computed { status, events }
}

/// Whether `status` was resolved from the artifact source whose digest is `source`.
fn same_source(status: &ImageSelectionPolicyStatus, source: &str) -> bool {
    status.artifact.as_ref().and_then(|a| a.source.as_deref()) == Some(source)
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
        candidates: i32::try_from(resolved.candidate_count()).unwrap_or(i32::MAX),
        fetched_at: match earlier {
            Some(a) => a.fetched_at.clone(),
            None => Some(now.clone()),
        },
        source: None,
    }
}

/// One row per class of the nodes that count: the decision's answers, as status rows.
fn class_rows(resolved: &Resolved, inputs: &StatusInputs<'_>) -> Vec<ClassStatus> {
    let nodes = inputs
        .nodes
        .iter()
        .map(|(name, node)| (name.as_str(), node));
    resolve_classes(
        resolved,
        &inputs.spec.node_selector,
        nodes,
        inputs.platforms,
    )
    .iter()
    .map(|answer| ClassStatus {
        name: answer.class.name.clone(),
        labels: answer.class.labels.clone(),
        nodes: i32::try_from(answer.class.nodes.len()).unwrap_or(i32::MAX),
        image: answer.image().map(str::to_owned),
        matched: answer.explanation.chosen.as_ref().map(|c| ClassMatch {
            index: i32::try_from(c.index).unwrap_or(i32::MAX),
            tag: c.tag.clone(),
            weight: c.weight,
            // Candidates mode: the description of the candidate's set that matched.
            description: c
                .description
                .clone()
                .or_else(|| c.set.as_ref().and_then(|s| s.description.clone())),
        }),
        reason: Some(answer.reason()),
    })
    .collect()
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

/// The most one class's reason keeps.
const MAX_REASON_BYTES: usize = 1024;
/// The most the classes and `classKeys` take in the status together, as JSON.
const MAX_CLASSES_BYTES: usize = 1024 * 1024;
/// The most `classKeys` takes, as JSON.
const MAX_CLASS_KEYS_BYTES: usize = 256 * 1024;

/// How much of a status the classes and `classKeys` may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusLimits {
    /// The classes and `classKeys` together, as JSON.
    pub classes_bytes: usize,
    /// `classKeys` alone, as JSON.
    pub class_keys_bytes: usize,
}

impl StatusLimits {
    /// A policy an admin wrote: what etcd stores, with room for the rest.
    pub const WRITTEN: StatusLimits = StatusLimits {
        classes_bytes: MAX_CLASSES_BYTES,
        class_keys_bytes: MAX_CLASS_KEYS_BYTES,
    };
    /// A policy ocifit took charge of: a few classes' worth, whatever the artifact says.
    pub const MANAGED: StatusLimits = StatusLimits {
        classes_bytes: 16 * 1024,
        class_keys_bytes: 2 * 1024,
    };
}

/// Cuts the classes and `classKeys` of `status` to `limits`; what was cut, if anything, for the
/// `Truncated` condition.
fn bound_status(status: &mut ImageSelectionPolicyStatus, limits: StatusLimits) -> Option<String> {
    let keys = status.class_keys.as_ref().map_or(0, |keys| {
        serde_json::to_vec(keys).map_or(usize::MAX, |json| json.len())
    });
    if keys > limits.class_keys_bytes {
        status.class_keys = None;
        let left_out = status.classes.len();
        status.classes.clear();
        return Some(format!(
            "the status would exceed its bound: classKeys (the labels and features the \
             artifact's rules read, {keys} bytes) is over its limit of {} bytes, so it is \
             left out, and with it all {left_out} classes (their pods are denied as not ready)",
            limits.class_keys_bytes
        ));
    }
    bound_classes(
        &mut status.classes,
        limits.classes_bytes.saturating_sub(keys),
        limits.classes_bytes,
    )
}

/// Cuts `classes` to `bound` bytes of JSON (and each reason to [`MAX_REASON_BYTES`]), `whole`
/// less what `classKeys` takes; what was cut, if anything.
fn bound_classes(classes: &mut Vec<ClassStatus>, bound: usize, whole: usize) -> Option<String> {
    let mut cut = Vec::new();
    let mut long = 0;
    for reason in classes.iter_mut().filter_map(|class| class.reason.as_mut()) {
        if clip(reason, MAX_REASON_BYTES) {
            long += 1;
        }
    }
    if long > 0 {
        cut.push(format!(
            "the reasons of {long} classes cut to {MAX_REASON_BYTES} bytes"
        ));
    }
    if size(classes) > bound {
        for class in classes.iter_mut() {
            class.reason = None;
            if let Some(matched) = class.matched.as_mut() {
                matched.description = None;
            }
        }
        cut.push("every class's reason and set description left out".to_owned());
    }
    if size(classes) > bound {
        let total = classes.len();
        let mut used = 2; // the brackets of the list
        let kept = classes
            .iter()
            .take_while(|class| {
                used += size(std::slice::from_ref(*class)) - 1;
                used <= bound
            })
            .count();
        classes.truncate(kept);
        cut.push(format!(
            "{} of {total} classes left out (their pods are denied as not ready)",
            total - kept
        ));
    }
    (!cut.is_empty()).then(|| {
        format!(
            "the status would exceed its bound: {} (classes bounded to {bound} bytes, {whole} \
             less what classKeys takes)",
            cut.join("; ")
        )
    })
}

/// Cuts `text` to at most `limit` bytes (on a character boundary, marked); whether it was cut.
fn clip(text: &mut String, limit: usize) -> bool {
    if text.len() <= limit {
        return false;
    }
    const MARK: &str = " …(cut)";
    let mut end = limit - MARK.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(MARK);
    true
}

fn size(classes: &[ClassStatus]) -> usize {
    serde_json::to_vec(classes).map_or(usize::MAX, |json| json.len())
}

#[cfg(test)]
mod tests;
