//! The watch of one kind the caches own (Deployments, Services, claims): selected by the owned
//! objects' labels, which anyone who can create such an object can set too, so an object is kept
//! only when an ArtifactCache is its controlling owner, and without what the controller never
//! reads (managed fields, annotations). Anything else that carries the labels is dropped before
//! the store; an object that stops being controlled by a cache leaves it.

use futures_util::{Stream, TryStreamExt};
use kube::Resource;
use kube::runtime::watcher;

use crate::api::ArtifactCache;

/// Whether an ArtifactCache is `object`'s controlling owner.
pub fn controlled_by_a_cache<K: Resource>(object: &K) -> bool {
    let group = format!("{}/", ArtifactCache::group(&()));
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|owner| {
            owner.controller == Some(true)
                && owner.kind == ArtifactCache::kind(&())
                && owner.api_version.starts_with(&group)
        })
}

/// `events` with only the objects a cache controls, trimmed: another object's listing is
/// skipped, and its change announced as a deletion (so one that lost its cache leaves the
/// store).
pub fn controlled_only<K, S>(events: S) -> impl Stream<Item = watcher::Result<watcher::Event<K>>>
where
    K: Resource,
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    events.try_filter_map(|event| {
        std::future::ready(Ok(match event {
            watcher::Event::InitApply(object) => {
                controlled_by_a_cache(&object).then(|| watcher::Event::InitApply(trim(object)))
            }
            watcher::Event::Apply(object) if controlled_by_a_cache(&object) => {
                Some(watcher::Event::Apply(trim(object)))
            }
            watcher::Event::Apply(object) | watcher::Event::Delete(object) => {
                Some(watcher::Event::Delete(trim(object)))
            }
            watcher::Event::Init => Some(watcher::Event::Init),
            watcher::Event::InitDone => Some(watcher::Event::InitDone),
        }))
    })
}

fn trim<K: Resource>(mut object: K) -> K {
    let metadata = object.meta_mut();
    metadata.managed_fields = None;
    metadata.annotations = None;
    object
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::ObjectMeta;
    use kube::runtime::reflector::ObjectRef;

    use super::*;
    use crate::cluster::reflected::reflect;

    fn deployment(name: &str, owner: Option<(&str, &str, bool)>) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("team-a".into()),
                labels: Some(
                    [
                        ("app.kubernetes.io/name", "artifact-cache"),
                        ("app.kubernetes.io/managed-by", "ocifit"),
                    ]
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .into(),
                ),
                annotations: Some([("note".to_owned(), "x".repeat(4096))].into()),
                owner_references: owner.map(|(api_version, kind, controller)| {
                    vec![OwnerReference {
                        api_version: api_version.into(),
                        kind: kind.into(),
                        name: "cache".into(),
                        uid: "c-1".into(),
                        controller: Some(controller),
                        block_owner_deletion: None,
                    }]
                }),
                ..ObjectMeta::default()
            },
            ..Deployment::default()
        }
    }

    #[tokio::test]
    async fn only_objects_a_cache_controls_reach_the_store_and_without_annotations() {
        let cache = Some(("ocifit.io/v1alpha1", "ArtifactCache", true));
        let events = futures_util::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(deployment(
                "cache-registry",
                cache,
            ))),
            Ok(watcher::Event::InitApply(deployment("labelled", None))),
            Ok(watcher::Event::InitApply(deployment(
                "other-owner",
                Some(("apps/v1", "ReplicaSet", true)),
            ))),
            Ok(watcher::Event::InitApply(deployment(
                "not-controller",
                Some(("ocifit.io/v1alpha1", "ArtifactCache", false)),
            ))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(deployment("later", None))),
            Ok(watcher::Event::Apply(deployment("second", cache))),
            // Its cache let go of it.
            Ok(watcher::Event::Apply(deployment("second", None))),
        ]);
        let (reflected, task) = reflect(controlled_only(events), "test");
        task.await;
        let store = reflected.store();
        let mut names: Vec<String> = store
            .state()
            .iter()
            .filter_map(|d| d.metadata.name.clone())
            .collect();
        names.sort();
        assert_eq!(names, ["cache-registry"]);
        let kept = store
            .get(&ObjectRef::new("cache-registry").within("team-a"))
            .unwrap();
        assert_eq!(kept.metadata.annotations, None);
        assert!(kept.metadata.labels.is_some(), "labels are compared");
        assert!(kept.metadata.owner_references.is_some());
    }
}
