//! The watches that feed the controller and the webhook's caches, and their mappers: nodes
//! (metadata only) trigger only the policies whose classes they can change; NodeFeature objects
//! (once NFD's CRD exists) trigger the policies that read NFD features when their features
//! change; dockerconfigjson Secrets trigger the policies that name them.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures_util::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::context::Interests;
use super::triggers::Labels;
use crate::api::ImageSelectionPolicy;
use crate::engine::NodeFeature;

/// The API group and version of NFD's NodeFeature.
const NFD_API_VERSION: &str = "nfd.k8s-sigs.io/v1alpha1";
/// The field selector of the Secrets pull credentials come from.
const DOCKER_CONFIG_SECRETS: &str = "type=kubernetes.io/dockerconfigjson";

fn read<T>(lock: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Remembers each node's labels as last seen, to tell which policies a change concerns.
pub struct NodeTracker {
    interests: Interests,
    last: Mutex<HashMap<String, Labels>>,
}

impl NodeTracker {
    /// A tracker for the policies' interests.
    pub fn new(interests: Interests) -> NodeTracker {
        NodeTracker {
            interests,
            last: Mutex::default(),
        }
    }

    /// The policies a node event concerns (see [`marking_deletions`] for deleted nodes).
    pub fn policies_for(
        &self,
        node: &PartialObjectMeta<Node>,
    ) -> Vec<ObjectRef<ImageSelectionPolicy>> {
        let name = node.name_any();
        let now = node
            .metadata
            .deletion_timestamp
            .is_none()
            .then(|| node.metadata.labels.clone().unwrap_or_default());
        let before = {
            let mut last = lock(&self.last);
            match &now {
                Some(labels) => last.insert(name, labels.clone()),
                None => last.remove(&name),
            }
        };
        read(&self.interests)
            .iter()
            .filter(|(_, interest)| interest.affected_by(before.as_ref(), now.as_ref()))
            .map(|(policy, _)| ObjectRef::new(policy))
            .collect()
    }
}

/// Remembers a hash of each NodeFeature's features, so a rewrite with the same features (or of
/// its other fields) triggers nothing.
pub struct FeatureTracker {
    interests: Interests,
    last: Mutex<HashMap<(String, String), u64>>,
}

impl FeatureTracker {
    /// A tracker for the policies' interests.
    pub fn new(interests: Interests) -> FeatureTracker {
        FeatureTracker {
            interests,
            last: Mutex::default(),
        }
    }

    /// The policies reading NFD features, when this object's features changed.
    pub fn policies_for(&self, object: &NodeFeature) -> Vec<ObjectRef<ImageSelectionPolicy>> {
        let key = (object.namespace().unwrap_or_default(), object.name_any());
        let now = object.metadata.deletion_timestamp.is_none().then(|| {
            let mut hasher = DefaultHasher::new();
            serde_json::to_string(&object.spec.features)
                .unwrap_or_default()
                .hash(&mut hasher);
            hasher.finish()
        });
        let before = {
            let mut last = lock(&self.last);
            match now {
                Some(hash) => last.insert(key, hash),
                None => last.remove(&key),
            }
        };
        if before == now {
            return Vec::new();
        }
        read(&self.interests)
            .iter()
            .filter(|(_, interest)| interest.reads_features())
            .map(|(policy, _)| ObjectRef::new(policy))
            .collect()
    }
}

/// The policies naming a Secret as their pull secret.
pub fn policies_for_secret(
    policies: &Store<ImageSelectionPolicy>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<ImageSelectionPolicy>> {
    let (namespace, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
    policies
        .state()
        .iter()
        .filter(|p| {
            p.spec
                .artifact
                .pull_secret_ref
                .as_ref()
                .is_some_and(|r| r.namespace == namespace && r.name == name)
        })
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// Marks the objects of delete events with a deletion timestamp (when they carry none), so a
/// mapper that sees only objects can tell a deletion from an update. The store sees the events
/// before the marking, unchanged.
pub fn marking_deletions<K>(event: watcher::Event<K>) -> watcher::Event<K>
where
    K: kube::Resource,
{
    match event {
        watcher::Event::Delete(mut object) => {
            object
                .meta_mut()
                .deletion_timestamp
                .get_or_insert_with(|| Time(Timestamp::now()));
            watcher::Event::Delete(object)
        }
        other => other,
    }
}

/// Node metadata events, reflected into `writer`'s store.
pub fn nodes(
    client: Client,
    writer: kube::runtime::reflector::store::Writer<PartialObjectMeta<Node>>,
) -> impl Stream<Item = Result<PartialObjectMeta<Node>, watcher::Error>> + Send + 'static {
    watcher(
        Api::<PartialObjectMeta<Node>>::all(client),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(|node| {
        // Only names and labels are read: what else a node's metadata carries is not kept.
        node.metadata.managed_fields = None;
        node.metadata.annotations = None;
        node.metadata.owner_references = None;
    })
    .reflect(writer)
    .map_ok(marking_deletions)
    .touched_objects()
}

/// dockerconfigjson Secret metadata events (no store: the reconciler reads the one it needs).
pub fn secrets(
    client: Client,
) -> impl Stream<Item = Result<PartialObjectMeta<Secret>, watcher::Error>> + Send + 'static {
    watcher(
        Api::<PartialObjectMeta<Secret>>::all(client),
        watcher::Config::default().fields(DOCKER_CONFIG_SECRETS),
    )
    .default_backoff()
    .touched_objects()
}

/// NodeFeature events once NFD's CRD is installed (looked for every `interval` until then),
/// reflected into `writer`'s store.
pub fn node_features(
    client: Client,
    writer: kube::runtime::reflector::store::Writer<NodeFeature>,
    interval: Duration,
) -> impl Stream<Item = Result<NodeFeature, watcher::Error>> + Send + 'static {
    futures_util::stream::once(async move {
        wait_for_node_features(&client, interval).await;
        tracing::info!("NFD NodeFeature API found; watching NodeFeature objects");
        watcher(Api::<NodeFeature>::all(client), watcher::Config::default())
            .default_backoff()
            .modify(|object| object.metadata.managed_fields = None)
            .reflect(writer)
            .map_ok(marking_deletions)
            .touched_objects()
    })
    .flatten()
}

async fn wait_for_node_features(client: &Client, interval: Duration) {
    loop {
        match client.list_api_group_resources(NFD_API_VERSION).await {
            Ok(list) if list.resources.iter().any(|r| r.name == "nodefeatures") => return,
            Ok(_) | Err(_) => tokio::time::sleep(interval).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, RwLock};

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::watcher::Event;

    use super::*;
    use crate::controller::triggers::Interest;
    use crate::engine::Reads;

    fn node(name: &str, flavor: &str, team: &str) -> PartialObjectMeta<Node> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([
                    ("flavor".to_owned(), flavor.to_owned()),
                    ("team".to_owned(), team.to_owned()),
                ])),
                ..ObjectMeta::default()
            },
            _phantom: Default::default(),
        }
    }

    fn interests() -> Interests {
        Arc::new(RwLock::new(HashMap::from([(
            "flavors".to_owned(),
            Interest {
                node_selector: BTreeMap::new(),
                reads: Reads {
                    labels: ["flavor".to_owned()].into(),
                    features: BTreeMap::new(),
                },
            },
        )])))
    }

    #[test]
    fn node_events_trigger_only_policies_whose_classes_they_change() {
        let tracker = NodeTracker::new(interests());
        let apply = |n: PartialObjectMeta<Node>| tracker.policies_for(&n).len();
        assert_eq!(apply(node("a", "vanilla", "x")), 1, "a new node counts");
        assert_eq!(apply(node("a", "vanilla", "y")), 0, "an unread label");
        assert_eq!(apply(node("a", "chocolate", "y")), 1, "a read label");
        let Event::Delete(gone) = marking_deletions(Event::Delete(node("a", "chocolate", "y")))
        else {
            panic!("a delete event stays one");
        };
        assert_eq!(tracker.policies_for(&gone).len(), 1, "a deleted node");
        assert_eq!(tracker.policies_for(&gone).len(), 0, "deleted twice");
    }
}
