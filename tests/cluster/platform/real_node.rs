//! The test kit's real node (`ClusterBuilder::real_node`), beside kwok's fake ones: containerd, the
//! kubelet and kube-proxy run pods from images assembled here and pushed to the cluster's registry;
//! the node is chosen by its labels like any other; pods reach the apiserver through the
//! `kubernetes` Service, each other through ClusterIP Services, and the registry at this machine's
//! own address; kwok fakes pods on its own nodes but leaves the real one to its kubelet; and its
//! components' logs are the cluster's. Each test
//! has its own cluster (a real node cannot be shared), so their nodes also run side by side.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::Api;
use kube::api::PostParams;
use ocifit_testkit::image::flavor_image;
use ocifit_testkit::{
    Cluster, ClusterBuilder, FakeNode, RealNode, Registry, SharedCluster, TestPod,
    create_namespace, create_node, wait_for_pod_log, wait_for_pod_ready,
};

const NODE: &str = "real-1";
const WAIT: Duration = Duration::from_secs(60);

fn builder() -> ClusterBuilder {
    Cluster::builder()
        .with_all_controllers()
        .with_registry(Registry::builder())
        .real_node(RealNode::new(NODE).label("ocifit.io/test-node", "real"))
}

async fn cluster() -> Cluster {
    let cluster = builder().start().await.expect("a cluster with a real node");
    let times = cluster.startup_times();
    eprintln!(
        "cluster ready in {:.1} s, its real node in {:.1} s",
        times.total.as_secs_f64(),
        cluster.real_nodes()[0].startup_time().as_secs_f64()
    );
    cluster
}

/// A pod running `image` on the real node (chosen by the label the node was given), with `args`
/// as its command when given.
fn pod(name: &str, image: &str, command: Option<&str>) -> Pod {
    let pod = TestPod::named(name)
        .label("app", name)
        .node_selector("ocifit.io/test-node", "real")
        .grace_period(1)
        .container("main")
        .image(image);
    match command {
        Some(script) => pod.command(script),
        None => pod,
    }
    .build()
}

async fn create(client: &kube::Client, namespace: &str, pod: &Pod) {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), pod)
        .await
        .expect("the pod is created");
}

#[tokio::test]
async fn a_pod_chosen_by_the_nodes_label_runs_an_image_built_here_and_its_log_is_read() {
    let cluster = cluster().await;
    let client = cluster.client().expect("a client");
    create_namespace(&client, "runs")
        .await
        .expect("a namespace");
    let registry = cluster.registry().expect("a registry");
    let image = registry
        .push_built(
            &flavor_image("flavor vanilla").expect("a flavor image"),
            "flavors/vanilla",
            "v1",
        )
        .await
        .expect("the image is pushed");

    create(&client, "runs", &pod("vanilla", &image.reference, None)).await;

    let log = wait_for_pod_log(&client, "runs", "vanilla", "flavor vanilla", WAIT)
        .await
        .expect("the image's line in the pod's log");
    assert_eq!(log.trim(), "flavor vanilla");
    let running = wait_for_pod_ready(&client, "runs", "vanilla", WAIT)
        .await
        .expect("the pod is Ready");
    let node = cluster.real_node(NODE).expect("the real node");
    let status = running.status.expect("a status");
    assert_eq!(status.host_ip, Some(node.address().to_string()));
    let pod_ip = status.pod_ip.expect("a pod IP");
    let subnet_prefix = node.pod_subnet().trim_end_matches("0/24");
    assert!(
        pod_ip.starts_with(subnet_prefix),
        "{pod_ip} in {}",
        node.pod_subnet()
    );
}

#[tokio::test]
async fn pods_reach_the_apiserver_the_registry_and_each_other_through_services() {
    let cluster = cluster().await;
    let client = cluster.client().expect("a client");
    create_namespace(&client, "network")
        .await
        .expect("a namespace");
    let registry = cluster.registry().expect("a registry");
    let image = registry
        .push_built(
            &flavor_image("network test").expect("an image"),
            "network/busybox",
            "v1",
        )
        .await
        .expect("the image is pushed");

    create(
        &client,
        "network",
        &pod(
            "web",
            &image.reference,
            Some("mkdir /www && echo served by web > /www/index.html && exec busybox httpd -f -p 8080 -h /www"),
        ),
    )
    .await;
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }))
    .expect("a Service");
    Api::<Service>::namespaced(client.clone(), "network")
        .create(&PostParams::default(), &service)
        .await
        .expect("the Service is created");
    wait_for_pod_ready(&client, "network", "web", WAIT)
        .await
        .expect("the web pod is Ready");

    // Service environment variables name the ClusterIP (there is no cluster DNS).
    let script = format!(
        "busybox nc -w 5 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT </dev/null && echo apiserver reached; \
         wget -qO- http://{registry}/v2/ && echo; \
         until wget -qO- http://$WEB_SERVICE_HOST:$WEB_SERVICE_PORT/; do sleep 0.5; done; sleep 3600",
        registry = registry.addr()
    );
    create(
        &client,
        "network",
        &pod("client", &image.reference, Some(&script)),
    )
    .await;

    let log = wait_for_pod_log(&client, "network", "client", "served by web", WAIT)
        .await
        .expect("the client reaches the web Service");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines, ["apiserver reached", "{}", "served by web"], "{log}");
}

#[tokio::test]
async fn kwok_fakes_pods_on_its_nodes_and_leaves_the_real_node_to_its_kubelet() {
    let cluster = cluster().await;
    let client = cluster.client().expect("a client");
    create_node(&client, &FakeNode::new("fake-1"))
        .await
        .expect("a fake node");
    let missing = cluster
        .registry()
        .expect("a registry")
        .reference("nowhere/missing:v1");
    let on = |node: &str, name: &str| -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": missing}]},
        }))
        .expect("a pod")
    };
    create(&client, "default", &on("fake-1", "faked")).await;
    create(&client, "default", &on(NODE, "real")).await;

    // kwok makes its node's pod Ready without any image; the kubelet tries to pull it, and says so.
    wait_for_pod_ready(&client, "default", "faked", WAIT)
        .await
        .expect("kwok runs the pod on its node");
    let refused = wait_for_pod_ready(&client, "default", "real", WAIT)
        .await
        .expect_err("an image that does not exist never runs on the real node");
    let message = refused.to_string();
    assert!(
        message.contains("ErrImagePull") || message.contains("ImagePullBackOff"),
        "{message}"
    );

    let real = Api::<Node>::all(client.clone())
        .get(NODE)
        .await
        .expect("the real node");
    let status = real.status.expect("a status");
    let info = status.node_info.expect("node info");
    assert!(
        info.container_runtime_version.starts_with("containerd://"),
        "{info:?}"
    );
    let ready = status
        .conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    assert_eq!(ready.reason.as_deref(), Some("KubeletReady"), "{ready:?}");
    let labels: BTreeMap<String, String> = real.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("kubernetes.io/hostname").map(String::as_str),
        Some(NODE)
    );

    let tails = cluster.log_tails();
    for component in ["containerd", "kubelet", "kube-proxy"] {
        assert!(
            tails.contains(&format!("--- {NODE}-{component} ---")),
            "{tails}"
        );
    }
}

#[tokio::test]
async fn a_cluster_with_a_real_node_cannot_be_shared() {
    static SHARED: SharedCluster = SharedCluster::new(builder);
    let err = SHARED.get().await.err().expect("a refusal");
    assert!(err.to_string().contains("cannot be shared"), "{err}");
}
