//! kube-scheduler and kwok on the real local cluster: a pod goes to the Node its nodeSelector
//! matches and runs there; a pod no Node matches stays Pending, marked Unschedulable.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use ocifit_testkit::{Cluster, FakeNode, SharedCluster, TestPod, create_namespace, create_node};

static CLUSTER: SharedCluster = SharedCluster::new(|| Cluster::builder().with_all_controllers());

const WAIT: Duration = Duration::from_secs(30);

fn pod(name: &str, zone: &str) -> Pod {
    TestPod::named(name)
        .image("app:v1")
        .node_selector("ocifit.test/zone", zone)
        .build()
}

async fn create_pod(client: &Client, namespace: &str, pod: &Pod) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.create(&PostParams::default(), pod)
        .await
        .expect("pod created");
    pods
}

#[tokio::test]
async fn scheduler_binds_a_pod_to_the_node_its_selector_matches_and_kwok_runs_it() {
    let cluster = CLUSTER.get().await.unwrap();
    let client = cluster.client().unwrap();
    create_namespace(&client, "sched-match").await.unwrap();
    for (node, zone) in [("sched-a", "a"), ("sched-b", "b")] {
        create_node(
            &client,
            &FakeNode::new(node).label("ocifit.test/zone", zone),
        )
        .await
        .unwrap();
    }

    let pods = create_pod(&client, "sched-match", &pod("wants-b", "b")).await;
    let running = await_condition(pods, "wants-b", |pod: Option<&Pod>| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Running")
    });
    let pod = tokio::time::timeout(WAIT, running)
        .await
        .expect("the pod did not reach Running")
        .unwrap()
        .unwrap();

    assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("sched-b"));
}

#[tokio::test]
async fn a_pod_no_node_matches_stays_pending_as_unschedulable() {
    let cluster = CLUSTER.get().await.unwrap();
    let client = cluster.client().unwrap();
    create_namespace(&client, "sched-none").await.unwrap();
    create_node(
        &client,
        &FakeNode::new("sched-c").label("ocifit.test/zone", "c"),
    )
    .await
    .unwrap();

    let pods = create_pod(&client, "sched-none", &pod("wants-nowhere", "nowhere")).await;
    let unschedulable = await_condition(pods, "wants-nowhere", |pod: Option<&Pod>| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
            })
    });
    let pod = tokio::time::timeout(WAIT, unschedulable)
        .await
        .expect("the scheduler did not mark the pod Unschedulable")
        .unwrap()
        .unwrap();

    assert_eq!(pod.spec.unwrap().node_name, None);
    assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Pending"));
}
