//! The watches of the shared cluster view: nodes (metadata only, decoded into names and labels,
//! all any feature reads: see [`NodeMeta`]) and NFD NodeFeature objects once
//! NFD's CRD exists (never Secrets: they are read by name, see [`secrets`](super::secrets)). Each
//! yields raw watcher events, retried on the process's one [`watch_backoff`] and trimmed of what
//! no one reads; [`reflect`](super::reflected::reflect) stores and fans them out.
//! [`identity_and_labels`] is the one metadata trim every watch shares (features' too): identity,
//! versions, times and the labels read, never what anyone writing the object can pile on.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Weak};
use std::time::Duration;

use foldhash::fast::FixedState;

use futures_util::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::core::ObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use super::nodes::NodeMeta;
use super::nodes::{ClusterNode, Strings};
use crate::engine::{Features, NODE_NAME_LABEL, NodeFeature};
use crate::process::watch_backoff;

/// The API group and version of NFD's NodeFeature.
const NFD_API_VERSION: &str = "nfd.k8s-sigs.io/v1alpha1";

/// Objects per page of the (re)list of a watch over objects anyone may create and fill: a page
/// is held whole while it is decoded, so 20 of the largest objects the apiserver stores stay
/// well under the chart's memory limit, where kube's default of 500 would not (docs/security.md).
pub const UNTRUSTED_LIST_PAGE: u32 = 20;

/// A watch's events, or its error (retried with backoff).
pub type Events<K> = watcher::Result<watcher::Event<K>>;

/// Node metadata events, as [`ClusterNode`]s: names and labels (interned), nothing else.
pub(super) fn nodes(client: Client) -> impl Stream<Item = Events<ClusterNode>> + Send + 'static {
    let mut strings = Strings::default();
    watcher(Api::<NodeMeta>::all(client), watcher::Config::default())
        .backoff(watch_backoff())
        .map_ok(move |event| {
            let mut compact = |node| ClusterNode::from_metadata(node, &mut strings);
            match event {
                watcher::Event::Apply(node) => watcher::Event::Apply(compact(node)),
                watcher::Event::Delete(node) => watcher::Event::Delete(compact(node)),
                watcher::Event::InitApply(node) => watcher::Event::InitApply(compact(node)),
                watcher::Event::Init => watcher::Event::Init,
                watcher::Event::InitDone => watcher::Event::InitDone,
            }
        })
}

/// NodeFeature events once NFD's CRD is installed (looked for every `interval` until then),
/// objects with equal features sharing one copy of them (a node pool's machines are alike).
pub(super) fn node_features(
    client: Client,
    interval: Duration,
) -> impl Stream<Item = Events<NodeFeature>> + Send + 'static {
    futures_util::stream::once(async move {
        wait_for_node_features(&client, interval).await;
        tracing::info!("NFD NodeFeature API found; watching NodeFeature objects");
        let mut shared = SharedFeatures::default();
        watcher(Api::<NodeFeature>::all(client), watcher::Config::default())
            .backoff(watch_backoff())
            .modify(move |object| {
                trim_feature(object);
                shared.share(&mut object.spec.features);
            })
    })
    .flatten()
}

/// What the watch keeps of a NodeFeature: its identity, the label naming its node and the
/// features; NFD writes these, but whoever may write NodeFeatures could pile on the rest.
fn trim_feature(object: &mut NodeFeature) {
    identity_and_labels(&mut object.metadata, &[NODE_NAME_LABEL]);
}

/// One copy of each distinct set of features, by hash; copies no object holds any longer are
/// forgotten now and then.
#[derive(Default)]
struct SharedFeatures {
    by_hash: HashMap<u64, Vec<Weak<Features>>>,
    added_since_sweep: usize,
}

impl SharedFeatures {
    /// Replaces `features` with the shared copy of equal features, or makes it the shared copy.
    fn share(&mut self, features: &mut Arc<Features>) {
        let hash = FixedState::default().hash_one(&**features);
        let copies = self.by_hash.entry(hash).or_default();
        if let Some(copy) = copies
            .iter()
            .filter_map(Weak::upgrade)
            .find(|copy| **copy == **features)
        {
            *features = copy;
            return;
        }
        copies.push(Arc::downgrade(features));
        self.added_since_sweep += 1;
        if self.added_since_sweep > self.by_hash.len().max(1024) {
            self.by_hash.retain(|_, copies| {
                copies.retain(|copy| copy.strong_count() > 0);
                !copies.is_empty()
            });
            self.added_since_sweep = 0;
        }
    }
}

async fn wait_for_node_features(client: &Client, interval: Duration) {
    loop {
        match client.list_api_group_resources(NFD_API_VERSION).await {
            Ok(list) if list.resources.iter().any(|r| r.name == "nodefeatures") => return,
            Ok(_) | Err(_) => tokio::time::sleep(interval).await,
        }
    }
}

/// Keeps of `meta` the name, namespace, uid, resourceVersion, generation, creation and
/// deletion times, and the labels whose keys start with one of `labels` (a map the object has
/// stays, maybe emptied).
pub fn identity_and_labels(meta: &mut ObjectMeta, labels: &[&str]) {
    let whole = std::mem::take(meta);
    *meta = ObjectMeta {
        name: whole.name,
        namespace: whole.namespace,
        uid: whole.uid,
        resource_version: whole.resource_version,
        generation: whole.generation,
        creation_timestamp: whole.creation_timestamp,
        deletion_timestamp: whole.deletion_timestamp,
        labels: whole.labels.map(|mut map| {
            map.retain(|key, _| labels.iter().any(|prefix| key.starts_with(prefix)));
            map
        }),
        ..ObjectMeta::default()
    };
}

/// A Deployment's pod selector as a label selector for a list (`k=v,…`); none without
/// `matchLabels` (which ocifit's Deployments always set), as an empty one would list every pod.
pub fn pod_selector(deployment: &Deployment) -> Option<String> {
    let labels = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.selector.match_labels.as_ref())
        .filter(|labels| !labels.is_empty())?;
    let pairs: Vec<String> = labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    Some(pairs.join(","))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, OwnerReference, Time,
    };
    use serde_json::{Value, json};

    use super::*;

    fn features(flag: &str) -> Arc<Features> {
        Arc::new(Features {
            flags: [("cpu.cpuid".to_owned(), BTreeSet::from([flag.to_owned()]))].into(),
            ..Features::default()
        })
    }

    #[test]
    fn a_node_feature_is_held_with_its_node_name_label_and_features_only() {
        let mut object: NodeFeature = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "n1",
                "namespace": "node-feature-discovery",
                "labels": {NODE_NAME_LABEL: "n1", "other": "x".repeat(60_000)},
                "annotations": {"note": "x".repeat(60_000)},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "o"}],
            },
            "spec": {"features": {"flags": {"cpu.cpuid": {"elements": {"AVX512F": {}}}}}},
        }))
        .unwrap();
        let features = Arc::clone(&object.spec.features);
        trim_feature(&mut object);
        assert_eq!(
            serde_json::to_value(&object.metadata).unwrap(),
            serde_json::json!({
                "name": "n1",
                "namespace": "node-feature-discovery",
                "labels": {NODE_NAME_LABEL: "n1"},
            })
        );
        assert_eq!(object.spec.features, features);
    }

    #[test]
    fn equal_features_are_held_once_and_different_ones_apart() {
        let mut shared = SharedFeatures::default();
        let (mut a, mut b, mut c) = (features("AVX512F"), features("AVX512F"), features("SSE4"));
        shared.share(&mut a);
        shared.share(&mut b);
        shared.share(&mut c);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, *features("SSE4"));
    }

    #[test]
    fn identity_versions_times_and_the_labels_read_are_kept_and_nothing_else() {
        let pile = "x".repeat(64 * 1024);
        let time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let mut meta = ObjectMeta {
            name: Some("p".into()),
            namespace: Some("n".into()),
            uid: Some("u".into()),
            resource_version: Some("3".into()),
            generation: Some(2),
            creation_timestamp: Some(time.clone()),
            deletion_timestamp: Some(time),
            generate_name: Some(pile.clone()),
            labels: Some(BTreeMap::from([
                ("selection.ocifit.io/managed".to_owned(), "true".to_owned()),
                ("app".to_owned(), pile.clone()),
            ])),
            annotations: Some(BTreeMap::from([("a".to_owned(), pile.clone())])),
            finalizers: Some(vec![pile.clone()]),
            owner_references: Some(vec![OwnerReference {
                name: pile.clone(),
                ..OwnerReference::default()
            }]),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some(pile),
                ..ManagedFieldsEntry::default()
            }]),
            ..ObjectMeta::default()
        };
        identity_and_labels(&mut meta, &["selection.ocifit.io/"]);
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({
                "name": "p",
                "namespace": "n",
                "uid": "u",
                "resourceVersion": "3",
                "generation": 2,
                "creationTimestamp": "1970-01-01T00:00:00Z",
                "deletionTimestamp": "1970-01-01T00:00:00Z",
                "labels": {"selection.ocifit.io/managed": "true"},
            })
        );
    }

    #[test]
    fn a_deployment_selects_its_pods_by_its_match_labels_and_never_all_pods() {
        let deployment = |labels: Option<Value>| -> Deployment {
            let mut spec = json!({"selector": {}, "template": {}});
            if let Some(labels) = labels {
                spec["selector"]["matchLabels"] = labels;
            }
            serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": spec})).unwrap()
        };
        let labelled = deployment(Some(json!({"b": "2", "a": "1"})));
        assert_eq!(pod_selector(&labelled).as_deref(), Some("a=1,b=2"));
        assert_eq!(pod_selector(&deployment(Some(json!({})))), None);
        assert_eq!(pod_selector(&deployment(None)), None);
        assert_eq!(pod_selector(&Deployment::default()), None);
    }
}
