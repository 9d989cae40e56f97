use kube::runtime::watcher::Event;
use serde_json::json;
use tokio::sync::mpsc;

use super::*;
use crate::cluster::Events;
use crate::cluster::Leadership;
use crate::cluster::reflect;
use crate::image_selection::planner::tests::fixtures::{policy, resolved, simple_pod};

/// A node as the node watch hands it on (`version`: its resourceVersion, which a heartbeat
/// changes and nothing else).
fn node(name: &str, flavor: &str, version: &str) -> ClusterNode {
    let mut strings = crate::cluster::Strings::default();
    let labels = [
        ("flavor", flavor),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
    ];
    let mut node = ClusterNode::new(name, labels, &mut strings);
    node.metadata.resource_version = Some(version.into());
    node
}

struct Fed {
    policies: mpsc::UnboundedSender<Events<ImageSelectionPolicy>>,
    nodes: mpsc::UnboundedSender<Events<ClusterNode>>,
    index: SharedIndex,
    metrics: Arc<Metrics>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Fed {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|task| task.abort());
    }
}

/// A store fed by the test through a channel, as a watch would feed it.
fn watched<K>(
    what: &'static str,
) -> (
    mpsc::UnboundedSender<Events<K>>,
    Reflected<K>,
    tokio::task::JoinHandle<()>,
)
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let events = futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx));
    let (reflected, task) = reflect(events, what);
    (sender, reflected, tokio::spawn(task))
}

fn start() -> Fed {
    let (policies, policy_store, policy_task) = watched("policies");
    let (nodes, node_store, node_task) = watched("nodes");
    let (_features, feature_store, feature_task) = watched::<NodeFeature>("nodefeatures");
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let cluster = ClusterView {
        client,
        nodes: node_store,
        node_features: feature_store,
        leadership: Leadership::always().0,
        settings: crate::cluster::ViewSettings::default(),
    };
    let index = SharedIndex::default();
    let metrics = Metrics::new(None);
    let fed = tokio::spawn(feed(
        policy_store,
        cluster,
        index.clone(),
        Arc::clone(&metrics),
    ));
    Fed {
        policies,
        nodes,
        index,
        metrics,
        tasks: vec![policy_task, node_task, feature_task, fed],
    }
}

fn init<K>(sender: &mpsc::UnboundedSender<Events<K>>, objects: Vec<K>) {
    let _ = sender.send(Ok(Event::Init));
    for object in objects {
        let _ = sender.send(Ok(Event::InitApply(object)));
    }
    let _ = sender.send(Ok(Event::InitDone));
}

/// Lets every task take what is queued for it.
async fn settle() {
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
}

/// The image the current index gives a pod on flavor `flavor`.
fn image_for(index: &SharedIndex, flavor: &str) -> Option<String> {
    let pod = simple_pod(json!({}), json!({"nodeSelector": {"flavor": flavor}}));
    match index.load()?.plan_pod(&pod) {
        crate::image_selection::planner::ImagePlan::Patch { annotations, .. } => {
            annotations.get(crate::api::pod::DECISION_IMAGES).cloned()
        }
        _ => None,
    }
}

#[tokio::test]
async fn no_index_before_the_stores_synced_then_one_build() {
    let fed = start();
    settle().await;
    assert!(!fed.index.is_built());
    init(&fed.nodes, vec![node("n1", "vanilla", "1")]);
    settle().await;
    assert!(!fed.index.is_built(), "built before the policies synced");
    init(&fed.policies, vec![resolved(policy("app", json!({})))]);
    settle().await;
    assert!(fed.index.is_built());
    assert_eq!(fed.metrics.index_rebuilds(), 1);
}

#[tokio::test]
async fn a_heartbeat_rebuilds_nothing_and_a_label_change_rebuilds_once() {
    let fed = start();
    init(&fed.policies, vec![resolved(policy("app", json!({})))]);
    init(
        &fed.nodes,
        vec![node("n1", "vanilla", "1"), node("n3", "chocolate", "1")],
    );
    settle().await;
    assert_eq!(fed.metrics.index_rebuilds(), 1);
    assert!(image_for(&fed.index, "chocolate").is_some());

    // A status update: new resourceVersion, same labels.
    let _ = fed.nodes.send(Ok(Event::Apply(node("n1", "vanilla", "2"))));
    settle().await;
    assert_eq!(fed.metrics.index_rebuilds(), 1);

    // n3 relabelled: no chocolate node is left, so a chocolate pod no longer gets an image.
    let _ = fed.nodes.send(Ok(Event::Apply(node("n3", "vanilla", "2"))));
    let _ = fed.nodes.send(Ok(Event::Apply(node("n1", "vanilla", "3"))));
    settle().await;
    assert_eq!(fed.metrics.index_rebuilds(), 2);
    assert_eq!(image_for(&fed.index, "chocolate"), None);
}

#[tokio::test]
async fn a_deleted_node_rebuilds_and_leaves_the_index() {
    let fed = start();
    init(&fed.policies, vec![resolved(policy("app", json!({})))]);
    init(
        &fed.nodes,
        vec![node("n1", "vanilla", "1"), node("n3", "chocolate", "1")],
    );
    settle().await;
    assert!(image_for(&fed.index, "chocolate").is_some());
    let _ = fed
        .nodes
        .send(Ok(Event::Delete(node("n3", "chocolate", "1"))));
    settle().await;
    assert_eq!(fed.metrics.index_rebuilds(), 2);
    assert_eq!(image_for(&fed.index, "chocolate"), None);
}
