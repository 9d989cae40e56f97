//! The watch of one kind the caches own (Deployments, Services, claims). Its labels and an
//! ownerReference are anyone's to set, so an object is kept only when ocifit made it for a cache
//! in the store: its controlling owner is the ArtifactCache of that name with that UID, and its
//! name is the one ocifit derives ([`desired::object_name`]), one object per kind and cache
//! whatever a namespace creates. Of it only what the controller reads is kept ([`Trimmed`]): its
//! identity, that owner and a digest of the parts put back ([`restored::Ours`]), so a fat owned
//! Deployment costs the store no more than a lean one. An object that stops qualifying leaves it.

use std::borrow::Cow;
use std::marker::PhantomData;

use futures_util::{Stream, TryStreamExt};
use kube::Resource;
use kube::core::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde::Serialize;

use super::desired;
use super::restored::{self, Ours};
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
        ours: restored::ours(object),
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

#[cfg(test)]
mod tests;
