//! Whether applying a cache's objects put back something someone else changed or deleted, and
//! the note of the Event that says so. Pure: the controller passes what its watch last saw of
//! the object and what the apply returned.

use serde::Serialize;
use serde_json::Value;

/// The reason of the Event on the cache when one of its objects was put back.
pub const REASON: &str = "ObjectRestored";

/// The parts of an owned object the controller sets and compares: the rest (status, fields
/// others added) is not ours to put back.
const OURS: [(&str, &[&str]); 2] = [("spec", &["spec"]), ("labels", &["metadata", "labels"])];

/// What the controller did to an owned object someone else changed or deleted: the Event's
/// action (`Recreate`, `Restore`: an object put back twice stays two Events) and its note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    pub action: &'static str,
    pub note: String,
}

/// The Event when the apply put back `what` (e.g. "its Deployment") named `name`, or `None`
/// when it changed nothing someone else did. `before` is the object as the watch last saw it
/// (`None`: not there), `after` as the apply returned it. `applied_before`: the cache's objects
/// were applied for its current generation and the watch holds a full list, so a difference is
/// someone else's doing, not a new spec or a first creation.
pub fn restored<K: Serialize>(
    what: &str,
    name: &str,
    before: Option<&K>,
    after: &K,
    applied_before: bool,
) -> Option<Restored> {
    if !applied_before {
        return None;
    }
    let Some(before) = before else {
        return Some(Restored {
            action: "Recreate",
            note: format!("{what} {name} was deleted; created again"),
        });
    };
    let (before, after) = (
        serde_json::to_value(before).ok()?,
        serde_json::to_value(after).ok()?,
    );
    let changed: Vec<&str> = OURS
        .iter()
        .filter(|(_, path)| at(&before, path) != at(&after, path))
        .map(|(part, _)| *part)
        .collect();
    (!changed.is_empty()).then(|| Restored {
        action: "Restore",
        note: format!(
            "{what} {name} was changed ({}); put back as the cache asks",
            changed.join(", ")
        ),
    })
}

fn at<'v>(value: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(value, |value, key| value.get(key))
}

#[cfg(test)]
mod tests;
