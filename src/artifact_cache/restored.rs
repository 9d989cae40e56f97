//! Whether applying a cache's objects put back something someone else changed or deleted, and
//! the note of the Event that says so. Pure: the controller passes a digest of what its watch
//! last saw of the object and of what the apply returned ([`ours`]).

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The reason of the Event on the cache when one of its objects was put back.
pub(super) const REASON: &str = "ObjectRestored";

/// The parts of an owned object the controller sets and compares: the rest (status, fields
/// others added) is not ours to put back.
const OURS: [(&str, &[&str]); 2] = [("spec", &["spec"]), ("labels", &["metadata", "labels"])];

/// The object's UID and the SHA-256 of each of its parts in [`OURS`] (of `null` when absent):
/// what the owned watches keep of those parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ours {
    /// Another UID after the apply: the object was deleted and created anew, seen even before
    /// the watch has the deletion (the apply can overtake it).
    uid: Option<String>,
    parts: [[u8; 32]; OURS.len()],
}

/// The UID and the digest of `object`'s parts the controller sets.
pub(super) fn ours<K: Serialize>(object: &K) -> Ours {
    let value = serde_json::to_value(object).unwrap_or(Value::Null);
    Ours {
        uid: at(&value, &["metadata", "uid"])
            .and_then(Value::as_str)
            .map(str::to_owned),
        parts: OURS.map(|(_, path)| {
            let part = at(&value, path).map(Value::to_string).unwrap_or_default();
            Sha256::digest(part.as_bytes()).into()
        }),
    }
}

/// What the controller did to an owned object someone else changed or deleted: the Event's
/// action (`Recreate`, `Restore`: an object put back twice stays two Events) and its note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Restored {
    pub action: &'static str,
    pub note: String,
}

/// The Event when the apply put back `what` (e.g. "its Deployment") named `name`, if it undid
/// someone's change: `before` is the watch's digest (`None`: absent), `after` the applied object's;
/// only with `applied_before` (this generation applied, a full list held) is a difference theirs.
pub(super) fn restored(
    what: &str,
    name: &str,
    before: Option<&Ours>,
    after: &Ours,
    applied_before: bool,
) -> Option<Restored> {
    if !applied_before {
        return None;
    }
    let before = match before {
        Some(before) if before.uid == after.uid => before,
        // Not there, or the watch still holds the object someone deleted: the apply created it.
        _ => {
            return Some(Restored {
                action: "Recreate",
                note: format!("{what} {name} was deleted; created again"),
            });
        }
    };
    let changed: Vec<&str> = OURS
        .iter()
        .zip(before.parts.iter().zip(&after.parts))
        .filter(|(_, (before, after))| before != after)
        .map(|((part, _), _)| *part)
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
