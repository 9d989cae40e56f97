//! The Events a status change deserves: one per condition whose status or reason moved (Degraded
//! only when it turns on, or off again), and one for a new artifact digest.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::{Event, EventKind};
use crate::api::{ConditionType, ImageSelectionPolicyStatus, Reason};

/// Events for what changed: a condition whose status or reason moved, and a new artifact digest.
pub(super) fn events(
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

pub(super) fn reason_from(text: &str) -> Option<Reason> {
    Reason::ALL.iter().copied().find(|r| r.as_str() == text)
}
