//! The watch of one kind the caches own (Deployments, Services, claims). Its labels and an
//! ownerReference are anyone's to set, so an object is kept only when ocifit made it for a cache in
//! the store: its controlling owner is the ArtifactCache of that name with that UID, and its name
//! is the one ocifit derives ([`desired::object_name`]), one object per kind and cache whatever a
//! namespace creates. Of it only what the controller reads is kept ([`Trimmed`]): its identity,
//! that owner and a digest of the parts put back ([`Ours`]), so a fat owned Deployment costs the
//! store no more than a lean one; an apply that put back what someone else changed or deleted is
//! told by them ([`restored`]). An object that stops qualifying leaves it.

use std::borrow::Cow;
use std::marker::PhantomData;

use futures_util::{Stream, TryStreamExt};
use kube::Resource;
use kube::core::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::desired;
use crate::api::ArtifactCache;

/// What the owned watches keep of an object of kind `K`.
#[derive(Debug)]
pub(super) struct Trimmed<K> {
    /// Name, namespace, UID, resourceVersion and the controlling owner.
    pub metadata: ObjectMeta,
    /// The digest of the parts the controller sets.
    pub ours: Ours,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Trimmed<K> {
    fn clone(&self) -> Self {
        Trimmed {
            metadata: self.metadata.clone(),
            ours: self.ours.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Trimmed<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Keeps of `object` what the controller reads.
pub(super) fn trim<K: Resource + Serialize>(object: &K) -> Trimmed<K> {
    let meta = object.meta();
    Trimmed {
        metadata: ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            owner_references: controlling_cache(meta).map(|owner| vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        ours: ours(object),
        kind: PhantomData,
    }
}

fn controlling_cache(
    meta: &ObjectMeta,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    let group = format!("{}/", ArtifactCache::group(&()));
    meta.owner_references.iter().flatten().find(|owner| {
        owner.controller == Some(true)
            && owner.kind == ArtifactCache::kind(&())
            && owner.api_version.starts_with(&group)
    })
}

/// Whether `meta` is that of an object ocifit made for a cache in `caches` (see the module's
/// summary).
pub(super) fn made_for_a_cache(meta: &ObjectMeta, caches: &Store<ArtifactCache>) -> bool {
    let (Some(owner), Some(namespace)) = (controlling_cache(meta), meta.namespace.as_deref())
    else {
        return false;
    };
    let named = meta.name.as_deref() == Some(desired::object_name(&owner.name).as_str());
    named
        && caches
            .get(&ObjectRef::new(&owner.name).within(namespace))
            .is_some_and(|cache| cache.metadata.uid.as_deref() == Some(owner.uid.as_str()))
}

/// `events` with only the objects ocifit made for a cache in `caches`, trimmed: another object's
/// listing is skipped, and its change announced as a deletion (so one that lost its cache leaves
/// the store).
pub(super) fn made_only<K, S>(
    events: S,
    caches: Store<ArtifactCache>,
) -> impl Stream<Item = watcher::Result<watcher::Event<Trimmed<K>>>>
where
    K: Resource<DynamicType = ()> + Serialize,
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    events.try_filter_map(move |event| {
        let ours = |object: &K| made_for_a_cache(object.meta(), &caches);
        std::future::ready(Ok(match event {
            watcher::Event::InitApply(object) => {
                ours(&object).then(|| watcher::Event::InitApply(trim(&object)))
            }
            watcher::Event::Apply(object) if ours(&object) => {
                Some(watcher::Event::Apply(trim(&object)))
            }
            watcher::Event::Apply(object) | watcher::Event::Delete(object) => {
                Some(watcher::Event::Delete(trim(&object)))
            }
            watcher::Event::Init => Some(watcher::Event::Init),
            watcher::Event::InitDone => Some(watcher::Event::InitDone),
        }))
    })
}

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
    /// Bumped by the apiserver on every spec change (Deployments): a change someone made and the
    /// apply undid shows here even when the watch never showed it.
    generation: Option<i64>,
    parts: [[u8; 32]; OURS.len()],
}

/// The UID and the digest of `object`'s parts the controller sets.
pub(super) fn ours<K: Serialize>(object: &K) -> Ours {
    let value = serde_json::to_value(object).unwrap_or(Value::Null);
    Ours {
        uid: at(&value, &["metadata", "uid"])
            .and_then(Value::as_str)
            .map(str::to_owned),
        generation: at(&value, &["metadata", "generation"]).and_then(Value::as_i64),
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

/// The Event when the apply put back `what` named `name`, if it undid someone's change: `before`
/// is the watch's digest, `after` the applied object's, `last_applied` this controller's last apply's;
/// only with `applied_before` (this generation applied, a full list held) is a difference theirs.
pub(super) fn restored(
    what: &str,
    name: &str,
    before: Option<&Ours>,
    after: &Ours,
    (applied_before, last_applied): (bool, Option<&Ours>),
) -> Option<Restored> {
    if !applied_before {
        return None;
    }
    let before = match before {
        Some(before) if before.uid == after.uid => before,
        // The watch has not yet seen the object this controller's last apply created.
        None if last_applied.is_some_and(|last| last.uid == after.uid) => return None,
        // Not there, or the watch still holds the object someone deleted: the apply created it.
        _ => {
            return Some(Restored {
                action: "Recreate",
                note: format!("{what} {name} was deleted; created again"),
            });
        }
    };
    let mut changed: Vec<&str> = OURS
        .iter()
        .zip(before.parts.iter().zip(&after.parts))
        .filter(|(_, (before, after))| before != after)
        .map(|((part, _), _)| *part)
        .collect();
    // The apply overtook the watch's news of a spec change: the generation moved all the same.
    let spec_moved = last_applied.is_some_and(|last| {
        last.uid == after.uid && last.generation.is_some() && after.generation > last.generation
    });
    if changed.is_empty() && spec_moved {
        changed.push("spec");
    }
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
