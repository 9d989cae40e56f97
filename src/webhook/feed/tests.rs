use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::Event;
use serde_json::json;

use super::*;
use crate::api::ImageSelectionPolicy;
use crate::engine::NodeFeature;
use crate::webhook::planner::tests::fixtures::{policy, resolved, simple_pod};

fn node(name: &str, flavor: &str, version: &str) -> PartialObjectMeta<Node> {
    PartialObjectMeta {
        types: None,
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some(version.into()),
            labels: Some(
                [
                    ("flavor", flavor),
                    ("kubernetes.io/arch", "amd64"),
                    ("kubernetes.io/os", "linux"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ),
            ..ObjectMeta::default()
        },
        _phantom: Default::default(),
    }
}

struct Fed {
    policies: Writer<ImageSelectionPolicy>,
    nodes: Writer<PartialObjectMeta<Node>>,
    index: SharedIndex,
    metrics: Arc<Metrics>,
    task: tokio::task::JoinHandle<()>,
}

fn start() -> Fed {
    let (policy_store, policies) = reflector::store();
    let (node_store, nodes) = reflector::store();
    let (features, _feature_writer) = reflector::store::<NodeFeature>();
    let index = SharedIndex::default();
    let metrics = Metrics::new(None);
    let task = tokio::spawn(feed(
        Stores {
            policies: policy_store,
            nodes: node_store,
            node_features: features,
        },
        "nfd".into(),
        index.clone(),
        Arc::clone(&metrics),
    ));
    Fed {
        policies,
        nodes,
        index,
        metrics,
        task,
    }
}

fn init<K: kube::Resource + Clone>(writer: &mut Writer<K>, objects: Vec<K>)
where
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    writer.apply_watcher_event(&Event::Init);
    for object in objects {
        writer.apply_watcher_event(&Event::InitApply(object));
    }
    writer.apply_watcher_event(&Event::InitDone);
}

/// Several check intervals: long enough for the feed to have looked.
async fn settle() {
    tokio::time::sleep(CHECK_INTERVAL * 4).await;
}

/// The image the current index gives a pod on flavor `flavor`.
fn image_for(index: &SharedIndex, flavor: &str) -> Option<String> {
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"flavor": flavor}}));
    match index.load()?.plan_pod(&pod) {
        crate::webhook::planner::Plan::Patch { annotations, .. } => {
            annotations.get(crate::api::pod::DECISION_IMAGES).cloned()
        }
        _ => None,
    }
}

#[tokio::test]
async fn no_index_before_the_stores_synced_then_one_build() {
    let mut fed = start();
    settle().await;
    assert!(!fed.index.is_built());
    init(&mut fed.nodes, vec![node("n1", "vanilla", "1")]);
    settle().await;
    assert!(!fed.index.is_built(), "built before the policies synced");
    init(&mut fed.policies, vec![resolved(policy("app", json!({})))]);
    settle().await;
    assert!(fed.index.is_built());
    assert_eq!(fed.metrics.index_rebuilds(), 1);
    fed.task.abort();
}

#[tokio::test]
async fn a_heartbeat_rebuilds_nothing_and_a_label_change_rebuilds_once() {
    let mut fed = start();
    init(&mut fed.policies, vec![resolved(policy("app", json!({})))]);
    init(
        &mut fed.nodes,
        vec![node("n1", "vanilla", "1"), node("n3", "chocolate", "1")],
    );
    settle().await;
    assert_eq!(fed.metrics.index_rebuilds(), 1);
    assert!(image_for(&fed.index, "chocolate").is_some());

    // A status update: new resourceVersion, same labels.
    fed.nodes
        .apply_watcher_event(&Event::Apply(node("n1", "vanilla", "2")));
    settle().await;
    assert_eq!(fed.metrics.index_rebuilds(), 1);

    // n3 relabelled: no chocolate node is left, so a chocolate pod no longer gets an image.
    fed.nodes
        .apply_watcher_event(&Event::Apply(node("n3", "vanilla", "2")));
    fed.nodes
        .apply_watcher_event(&Event::Apply(node("n1", "vanilla", "3")));
    settle().await;
    assert_eq!(fed.metrics.index_rebuilds(), 2);
    assert_eq!(image_for(&fed.index, "chocolate"), None);
    fed.task.abort();
}
