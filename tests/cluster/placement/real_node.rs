//! A pod placed by ocifit really runs: the real node (containerd and a kubelet, this machine's
//! architecture) beside a kwok node of the other architecture; the pod's image is built here
//! for this machine's architecture only (known from its config blob). Gated at creation,
//! released onto this architecture, bound by kube-scheduler to the real node, it starts and logs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::placement_pod::{PLATFORMS_ANNOTATION, SCHEDULING_GATE};
use ocifit_testkit::image::{flavor_image, foreign_architecture, machine_architecture};
use ocifit_testkit::{wait_for_pod_log, wait_for_pod_ready};
use serde_json::json;

use crate::support::objects::linux_node;
use crate::support::placement::{self, annotation, create_policy, gates};

const NAMESPACE: &str = "runs";
const NODE: &str = "real-1";
const WAIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_released_pod_runs_on_the_real_node_of_its_images_architecture() {
    let built = flavor_image("placed by ocifit").expect("an image");
    let (env, served, image) = placement::on_real_node(
        crate::support::ocifit_binary(),
        NODE,
        NAMESPACE,
        "placement-real-node",
        (&built, "placed/app"),
    )
    .await;
    let client = env.client.clone();
    env.add_node(linux_node("fake-other").label("kubernetes.io/arch", foreign_architecture()))
        .await;
    create_policy(&client, "default", json!({})).await;
    served
        .gate(&client, "ocifit-placement", NAMESPACE, &image)
        .await;

    let mut pod = placement::pod("app", NAMESPACE, json!({}), &[("main", &image)]);
    pod.spec
        .as_mut()
        .expect("a spec")
        .termination_grace_period_seconds = Some(1);
    let created = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &pod)
        .await
        .expect("created");
    assert_eq!(gates(&created), [SCHEDULING_GATE]);
    let log = wait_for_pod_log(&client, NAMESPACE, "app", "placed by ocifit", WAIT)
        .await
        .expect("the image's line in the pod's log");
    assert_eq!(log.trim(), "placed by ocifit");
    let running = wait_for_pod_ready(&client, NAMESPACE, "app", WAIT)
        .await
        .expect("the pod is Ready");
    assert_eq!(
        running.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(NODE)
    );
    assert_eq!(
        annotation(&running, PLATFORMS_ANNOTATION),
        format!("linux/{}", machine_architecture())
    );
}
