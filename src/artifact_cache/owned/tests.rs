use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::ObjectMeta;
use kube::runtime::reflector::store::Writer;

use super::*;
use crate::cluster::reflect;

mod restored;

const CACHE: &str = "ocifit.io/v1alpha1";

/// A store holding the cache `team-a/cache` of UID `c-1`.
fn caches() -> Store<ArtifactCache> {
    let mut cache = ArtifactCache::new("cache", serde_json::from_str("{}").unwrap());
    cache.metadata.namespace = Some("team-a".into());
    cache.metadata.uid = Some("c-1".into());
    let mut writer = Writer::default();
    writer.apply_watcher_event(&watcher::Event::Apply(cache));
    writer.as_reader()
}

fn deployment(name: &str, owner: Option<(&str, &str, &str, bool)>) -> Deployment {
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
            owner_references: owner.map(|(api_version, kind, uid, controller)| {
                vec![OwnerReference {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    name: "cache".into(),
                    uid: uid.into(),
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
async fn only_objects_ocifit_made_for_a_cache_in_the_store_are_kept() {
    let ours = Some((CACHE, "ArtifactCache", "c-1", true));
    let events = futures_util::stream::iter([
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(deployment(
            "cache-registry",
            ours,
        ))),
        Ok(watcher::Event::InitApply(deployment("labelled", None))),
        Ok(watcher::Event::InitApply(deployment(
            "cache-registry",
            Some(("apps/v1", "ReplicaSet", "c-1", true)),
        ))),
        Ok(watcher::Event::InitApply(deployment(
            "not-controller",
            Some((CACHE, "ArtifactCache", "c-1", false)),
        ))),
        // The cache's own UID, under a name ocifit never gives an object of it.
        Ok(watcher::Event::InitApply(deployment(
            "second-registry",
            ours,
        ))),
        Ok(watcher::Event::InitDone),
        Ok(watcher::Event::Apply(deployment("later", None))),
        Ok(watcher::Event::Apply(deployment("other-registry", ours))),
    ]);
    let (reflected, task) = reflect(made_only(events, caches()), "test");
    task.await;
    let names: Vec<String> = reflected
        .store()
        .state()
        .iter()
        .filter_map(|d| d.metadata.name.clone())
        .collect();
    assert_eq!(names, ["cache-registry"]);
}

#[test]
fn an_owner_reference_to_another_uid_or_an_absent_cache_is_not_ours() {
    let caches = caches();
    let made = |owner| made_for_a_cache(&deployment("cache-registry", owner).metadata, &caches);
    assert!(made(Some((CACHE, "ArtifactCache", "c-1", true))));
    // The tenant's own cache of that name was deleted and made again: its old UID.
    assert!(!made(Some((CACHE, "ArtifactCache", "c-0", true))));
    let mut elsewhere = deployment(
        "cache-registry",
        Some((CACHE, "ArtifactCache", "c-1", true)),
    );
    elsewhere.metadata.namespace = Some("team-b".into());
    assert!(!made_for_a_cache(&elsewhere.metadata, &caches));
}

#[tokio::test]
async fn a_fat_owned_object_is_kept_as_its_identity_and_a_digest() {
    let mut fat = deployment(
        "cache-registry",
        Some((CACHE, "ArtifactCache", "c-1", true)),
    );
    let big = "y".repeat(256 * 1024);
    fat.spec = Some(DeploymentSpec {
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                annotations: Some([("fat".to_owned(), big.clone())].into()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "registry".into(),
                    args: Some(vec![big]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
        },
        ..DeploymentSpec::default()
    });
    let events = futures_util::stream::iter([
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(fat.clone())),
        Ok(watcher::Event::InitDone),
    ]);
    let (reflected, task) = reflect(made_only(events, caches()), "test");
    task.await;
    let kept = reflected
        .store()
        .get(&ObjectRef::new("cache-registry").within("team-a"))
        .unwrap();
    assert_eq!(kept.metadata.annotations, None);
    assert_eq!(kept.metadata.labels, None);
    assert_eq!(
        kept.metadata.owner_references.as_ref().map(Vec::len),
        Some(1)
    );
    assert_eq!(kept.ours, ours(&fat), "what put-backs compare");
    let held = std::mem::size_of_val(&*kept) + serde_json::to_string(&kept.metadata).unwrap().len();
    assert!(held < 1024, "{held} bytes held");
}
