//! Image selection and platform placement on one pod, on the real control plane (kube-scheduler,
//! kwok nodes of three flavors, each in amd64 and arm64) with both routes of one `ocifit run`
//! behind two webhook configurations, the gate's called first (the apiserver orders
//! configurations by name), so the result is shown not to depend on the order: image selection
//! writes the image of the pod's classes (pinning them when they disagree), the gate only adds
//! its own two fields, and the controller inspects the image image selection wrote beside the
//! pod's arm64-only sidecar. The pod lands on a node of the classes it was pinned to where
//! every container runs; when the pinned classes leave no such node it is held, saying so.
//! `ocifit explain pod` tells both from the live cluster.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use kube::Api;
use kube::api::PostParams;
use ocifit::api::PlacementPolicy;
use ocifit::api::placement_pod::{MESSAGE_ANNOTATION, OUTCOME_ANNOTATION, SCHEDULING_GATE};
use ocifit::api::pod::{DECISION_IMAGES, ENABLED_LABEL};
use ocifit_testkit::{PodWebhook, register_pod_webhook, wait_until_admitted};
use serde_json::json;

use crate::support::objects::{OptIn, TestPod, linux_node};
use crate::support::placement::{self, WAIT, annotation, wait_pod};
use crate::support::{Env, FLAVOR};

const NAMESPACE: &str = "both";

/// An opted-in pod (placeholder image) with an arm64-only sidecar.
fn with_arm_sidecar(pod: TestPod, sidecar: &str) -> Pod {
    let mut pod = pod.opted_in().build();
    pod.metadata.namespace = Some(NAMESPACE.to_owned());
    pod.spec.as_mut().unwrap().containers.push(Container {
        name: "metrics".to_owned(),
        image: Some(sidecar.to_owned()),
        ..Container::default()
    });
    pod
}

#[tokio::test]
async fn the_pinned_classes_and_the_platforms_agree_whichever_webhook_runs_first() {
    let env = Env::start_scheduling(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    let flavors = env.push_flavors().await;
    for flavor in ["vanilla", "chocolate", "strawberry"] {
        for arch in ["amd64", "arm64"] {
            env.add_node(
                linux_node(&format!("{flavor}-{arch}"))
                    .label(FLAVOR, flavor)
                    .label("kubernetes.io/arch", arch),
            )
            .await;
        }
    }
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    let sidecar = env
        .registry()
        .push_image("shop/metrics", "v1", "linux/arm64")
        .await
        .expect("the arm64-only sidecar")
        .reference;

    let served = placement::serve(&env, "placement-with-selection", &[]).await;
    env.create_policy(&env.flavor_policy("flavors")).await;
    env.wait_ready("flavors").await;
    let placement: PlacementPolicy = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "default"},
        "spec": {},
    }))
    .unwrap();
    Api::<PlacementPolicy>::all(client.clone())
        .create(&PostParams::default(), &placement)
        .await
        .expect("the placement policy");
    // "a-…" sorts before "b-…": the gate is called first.
    for (name, path, opted_in) in [
        ("ocifit-a-placement", "/placement", false),
        ("ocifit-b-mutate", "/mutate", true),
    ] {
        let mut webhook = PodWebhook::new(
            name,
            &format!("https://{}{path}", served.address),
            served.ca.cert_pem(),
        )
        .in_namespace(NAMESPACE);
        if opted_in {
            webhook = webhook.match_label(ENABLED_LABEL, "true");
        }
        register_pod_webhook(&client, &webhook)
            .await
            .expect("a webhook configuration");
    }
    let probe = with_arm_sidecar(TestPod::named("probe"), &sidecar);
    wait_until_admitted(&client, NAMESPACE, &probe, WAIT, |p| {
        let spec = p.spec.as_ref().unwrap();
        flavors.contains(spec.containers[0].image.as_ref().unwrap())
            && spec
                .scheduling_gates
                .iter()
                .flatten()
                .any(|g| g.name == SCHEDULING_GATE)
    })
    .await
    .expect("both webhooks active");

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let nodes: Api<Node> = Api::all(client.clone());
    // Free to go anywhere: image selection pins the classes of one image, placement narrows
    // them to arm64.
    for i in 0..3 {
        let name = format!("free-{i}");
        pods.create(
            &PostParams::default(),
            &with_arm_sidecar(TestPod::named(&name), &sidecar),
        )
        .await
        .expect("created");
        let placed = wait_pod(&pods, &name, "bound", |p| {
            p.spec.as_ref().unwrap().node_name.is_some()
        })
        .await;
        let image = placed.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap();
        let flavor = ["vanilla", "chocolate", "strawberry"][flavors
            .iter()
            .position(|f| *f == image)
            .expect("an image of the artifact")];
        let node = nodes
            .get(placed.spec.as_ref().unwrap().node_name.as_ref().unwrap())
            .await
            .unwrap();
        let labels = node.metadata.labels.unwrap();
        assert_eq!(
            labels[FLAVOR], flavor,
            "on a node of the class its image was chosen for"
        );
        assert_eq!(
            labels["kubernetes.io/arch"], "arm64",
            "where the sidecar runs"
        );
        assert!(annotation(&placed, DECISION_IMAGES).contains(&image));
        assert_eq!(annotation(&placed, OUTCOME_ANNOTATION), "Constrained");
        if i == 0 {
            explained_selected(&env, &name, &image, flavor).await;
        }
    }
    // The pod's own selector leaves only amd64 vanilla nodes: image selection picks vanilla's
    // image, and placement holds the pod rather than send the arm64 sidecar there.
    let held = with_arm_sidecar(
        TestPod::named("amd-only")
            .node_selector(FLAVOR, "vanilla")
            .node_selector("kubernetes.io/arch", "amd64"),
        &sidecar,
    );
    pods.create(&PostParams::default(), &held)
        .await
        .expect("created");
    let held = wait_pod(&pods, "amd-only", "held", |p| {
        annotation(p, OUTCOME_ANNOTATION) == "Held"
    })
    .await;
    assert_eq!(
        held.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some(flavors[0].as_str())
    );
    assert!(
        held.spec.as_ref().unwrap().node_name.is_none(),
        "never scheduled"
    );
    let message = annotation(&held, MESSAGE_ANNOTATION);
    assert!(message.contains("allow none of the platforms"), "{message}");

    // `ocifit explain pod` says the gate is on, by which policy, and why.
    let report = crate::support::explain_pod(env.cluster.kubeconfig(), NAMESPACE, "amd-only").await;
    let placement = &report["placement"];
    assert_eq!(placement["gate"], "held", "{report:#}");
    assert_eq!(placement["policy"], "default");
    assert_eq!(placement["outcome"], "Held");
    assert!(
        placement["message"]
            .as_str()
            .unwrap()
            .contains("allow none of the platforms"),
        "{report:#}"
    );
    assert!(report["node"].is_null(), "never scheduled: {report:#}");
    assert_eq!(report["imageSelection"]["state"], "selected");
    assert_eq!(
        report["imageSelection"]["images"]["app"],
        flavors[0].as_str(),
        "{report:#}"
    );
}

/// `ocifit explain pod` on a pod both features handled: the policy, the image per container,
/// the class of its node with the image the policy resolved for it, the platforms placement
/// allowed and the node's own, from the live cluster.
async fn explained_selected(env: &Env, name: &str, image: &str, flavor: &str) {
    let report = crate::support::explain_pod(env.cluster.kubeconfig(), NAMESPACE, name).await;
    let selection = &report["imageSelection"];
    assert_eq!(selection["state"], "selected", "{report:#}");
    assert_eq!(selection["policy"], "flavors");
    assert_eq!(selection["images"]["app"], image, "{report:#}");
    let class = &selection["nodeClass"];
    assert_eq!(
        class["image"], image,
        "the node's class, drawn as the controller draws it, got this pod's image: {report:#}"
    );
    assert!(
        selection["classes"]
            .as_array()
            .unwrap()
            .contains(&class["name"]),
        "the node's class is one the pod may run on: {report:#}"
    );
    let placement = &report["placement"];
    assert_eq!(placement["gate"], "released");
    assert_eq!(placement["outcome"], "Constrained");
    assert_eq!(placement["nodePlatform"], "linux/arm64", "{report:#}");
    assert_eq!(placement["platforms"], json!(["linux/arm64"]), "{report:#}");
    assert_eq!(report["node"]["platform"], "linux/arm64");
    eprintln!("explained {name} ({flavor}): {report:#}");
}
