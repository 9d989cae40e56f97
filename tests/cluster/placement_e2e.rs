//! Platform placement end to end on the real control plane (apiserver, kube-scheduler binding for
//! real, kwok nodes of amd64, arm64 and a tainted arm64 pool) and a real registry with images
//! pushed by crane: `ocifit run` (the built binary) serves `/placement` behind a
//! MutatingWebhookConfiguration and runs the controller. Pods are gated at creation, released
//! by the controller, and bound by kube-scheduler only to nodes every container can run on (the
//! tainted pool only with the policy's toleration); the decision is on the pod as annotations and
//! Events. A registry that hangs follows the policy's failure path with Events naming the image;
//! a pod whose policy was deleted is released, not forgotten; the policy's status counts them;
//! with every replica down, a new pod is created ungated (failurePolicy Ignore) and scheduled.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use ocifit::api::PlacementPolicy;
use ocifit::api::placement::pod::{
    MESSAGE_ANNOTATION, OUTCOME_ANNOTATION, PLATFORMS_ANNOTATION, POLICY_LABEL, SCHEDULING_GATE,
};
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{Cluster, PodWebhook, register_pod_webhook, wait_until_admitted};
use serde_json::json;

use crate::support::objects::linux_node;
use crate::support::{Controller, Env, free_address};

const NAMESPACE: &str = "shop";
const WAIT: Duration = Duration::from_secs(30);
const ARM_POOL: &str = "arm-pool-1";

fn pod(name: &str, labels: serde_json::Value, containers: &[(&str, &str)]) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "containers": containers.iter().map(|(name, image)| json!({"name": name, "image": image})).collect::<Vec<_>>(),
        }
    }))
    .expect("a pod")
}

fn gates(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref())
        .into_iter()
        .flatten()
        .map(|gate| gate.name.clone())
        .collect()
}

fn annotation(pod: &Pod, key: &str) -> String {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(key))
        .cloned()
        .unwrap_or_default()
}

fn node_name(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|spec| spec.node_name.clone())
}

/// Waits until the pod satisfies `done`; the pod then.
async fn wait_pod(pods: &Api<Pod>, name: &str, what: &str, done: impl Fn(&Pod) -> bool) -> Pod {
    let start = Instant::now();
    loop {
        let pod = pods.get(name).await.expect("the pod");
        if done(&pod) {
            return pod;
        }
        assert!(
            start.elapsed() < WAIT,
            "pod {name}: {what} not seen within {WAIT:?}; pod: {:?}",
            (gates(&pod), node_name(&pod), pod.metadata.annotations)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Events on object `name` of `kind`: (reason, note).
async fn events(client: &kube::Client, kind: &str, name: &str) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    api.list(&Default::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|event| {
            let regarding = event.regarding.as_ref();
            regarding.and_then(|r| r.name.as_deref()) == Some(name)
                && regarding.and_then(|r| r.kind.as_deref()) == Some(kind)
        })
        .map(|event| {
            (
                event.reason.unwrap_or_default(),
                event.note.unwrap_or_default(),
            )
        })
        .collect()
}

async fn wait_event(client: &kube::Client, kind: &str, name: &str, reason: &str) -> String {
    let start = Instant::now();
    loop {
        let seen = events(client, kind, name).await;
        if let Some((_, note)) = seen.iter().find(|(r, _)| r == reason) {
            return note.clone();
        }
        assert!(
            start.elapsed() < WAIT,
            "no {reason} Event on {kind} {name}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create_policy(client: &kube::Client, name: &str, spec: serde_json::Value) {
    let policy: PlacementPolicy = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a policy");
    Api::<PlacementPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await
        .expect("the policy created");
}

#[tokio::test]
async fn pods_land_only_where_every_container_runs_and_are_never_left_gated() {
    let env = Env::start_with(Cluster::builder().with_all_controllers()).await;
    let client = env.client.clone();
    env.add_node(linux_node("amd-1")).await;
    env.add_node(linux_node("arm-1").label("kubernetes.io/arch", "arm64"))
        .await;
    env.add_node(linux_node(ARM_POOL).label("kubernetes.io/arch", "arm64"))
        .await;
    Api::<Node>::all(client.clone())
        .patch(
            ARM_POOL,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [{"key": "pool", "value": "arm64", "effect": "NoSchedule"}]}})),
        )
        .await
        .expect("the pool tainted");
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .expect("the namespace");
    let registry = env.registry();
    let web = registry
        .push_multi_platform("shop/web", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .expect("web");
    let metrics = registry
        .push_image("shop/metrics", "v1", "linux/arm64")
        .await
        .expect("the arm64-only sidecar");
    let legacy = registry
        .push_image("shop/legacy", "v1", "linux/amd64")
        .await
        .expect("the amd64-only sidecar");
    let proxy = registry
        .push_index_with_attestation("shop/proxy", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .expect("an index with attestations");

    let ca = CertificateAuthority::new("ocifit webhook CA").expect("a CA");
    let serving = ca
        .issue_server("ocifit-webhook", &["127.0.0.1"])
        .expect("a serving certificate");
    let (cert, key) = (
        env.cluster.dir().join("webhook.crt"),
        env.cluster.dir().join("webhook.key"),
    );
    std::fs::write(&cert, &serving.cert_pem).expect("the certificate");
    std::fs::write(&key, &serving.key_pem).expect("the key");
    let address = free_address();
    let controller = Controller::start(
        &env,
        "placement-e2e",
        &[
            "--webhook-bind-address",
            &address,
            "--tls-cert-file",
            &cert.display().to_string(),
            "--tls-key-file",
            &key.display().to_string(),
            "--registry-timeout",
            "1s",
        ],
    )
    .await;
    create_policy(
        &client,
        "default",
        json!({
            "architectures": [
                {"name": "arm64", "weight": 50, "tolerations": [
                    {"key": "pool", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}]},
                {"name": "amd64", "weight": 10},
            ],
        }),
    )
    .await;
    create_policy(
        &client,
        "fail-open",
        json!({
            "priority": 10,
            "podSelector": {"matchLabels": {"case": "registry-down"}},
            "onInspectionFailure": {"attempts": 2, "timeout": "1s", "action": "ReleaseUnconstrained"},
        }),
    )
    .await;
    register_pod_webhook(
        &client,
        &PodWebhook::new(
            "ocifit-placement",
            &format!("https://{address}/placement"),
            ca.cert_pem(),
        )
        .in_namespace(NAMESPACE),
    )
    .await
    .expect("the webhook configuration");
    let probe = pod("probe", json!({}), &[("web", &web.reference)]);
    wait_until_admitted(&client, NAMESPACE, &probe, WAIT, |p| {
        gates(p) == [SCHEDULING_GATE]
    })
    .await
    .expect("the gate webhook active");

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let create = async |pod: Pod| {
        let created = pods
            .create(&PostParams::default(), &pod)
            .await
            .expect("created");
        assert_eq!(gates(&created), [SCHEDULING_GATE], "gated at creation");
        let expected = match pod.labels().get("case") {
            Some(_) => "fail-open",
            None => "default",
        };
        assert_eq!(
            created.labels()[POLICY_LABEL],
            expected,
            "labelled with the winner"
        );
    };

    // An arm64-only sidecar beside a multi-platform main container: arm64 nodes only, the
    // tainted pool allowed by the policy's toleration.
    for i in 0..4 {
        create(pod(
            &format!("arm-{i}"),
            json!({}),
            &[("web", &web.reference), ("metrics", &metrics.reference)],
        ))
        .await;
    }
    // An amd64-only sidecar: amd64 only. An index with attestations: both architectures.
    create(pod(
        "amd",
        json!({}),
        &[("web", &web.reference), ("legacy", &legacy.reference)],
    ))
    .await;
    create(pod("proxy", json!({}), &[("proxy", &proxy.reference)])).await;
    for i in 0..4 {
        let placed = wait_pod(&pods, &format!("arm-{i}"), "bound", |p| {
            node_name(p).is_some()
        })
        .await;
        assert!(gates(&placed).is_empty());
        assert!(
            ["arm-1", ARM_POOL].contains(&node_name(&placed).unwrap().as_str()),
            "arm-{i} bound to {:?}",
            node_name(&placed)
        );
        assert_eq!(annotation(&placed, OUTCOME_ANNOTATION), "Constrained");
        assert_eq!(annotation(&placed, PLATFORMS_ANNOTATION), "linux/arm64");
    }
    let note = wait_event(&client, "Pod", "arm-0", "Placed").await;
    assert!(note.contains("linux/arm64"), "{note}");
    let amd = wait_pod(&pods, "amd", "bound", |p| node_name(p).is_some()).await;
    assert_eq!(node_name(&amd).as_deref(), Some("amd-1"));
    assert_eq!(annotation(&amd, PLATFORMS_ANNOTATION), "linux/amd64");
    let proxied = wait_pod(&pods, "proxy", "bound", |p| node_name(p).is_some()).await;
    assert_eq!(
        annotation(&proxied, PLATFORMS_ANNOTATION),
        "linux/amd64,linux/arm64"
    );

    // A pod whose policy was deleted is released, without a constraint, saying why.
    let mut orphan = pod(
        "orphan",
        json!({ POLICY_LABEL: "gone" }),
        &[("web", &web.reference)],
    );
    orphan.spec.as_mut().unwrap().scheduling_gates =
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: SCHEDULING_GATE.into(),
        }]);
    pods.create(&PostParams::default(), &orphan)
        .await
        .expect("created");
    let released = wait_pod(&pods, "orphan", "released", |p| gates(p).is_empty()).await;
    assert_eq!(annotation(&released, OUTCOME_ANNOTATION), "Unconstrained");
    assert!(
        annotation(&released, MESSAGE_ANNOTATION)
            .contains("placement policy gone no longer exists")
    );

    // The registry hangs: inspection fails with Events naming the image, and after the bound the
    // policy's action (release unconstrained) applies.
    let rebuilt = registry
        .push_image("shop/new", "v1", "linux/arm64")
        .await
        .expect("an image not yet inspected");
    registry.pause().expect("the registry frozen");
    create(pod(
        "down",
        json!({"case": "registry-down"}),
        &[("new", &rebuilt.reference)],
    ))
    .await;
    let note = wait_event(&client, "Pod", "down", "InspectionFailed").await;
    assert!(
        note.contains(&rebuilt.reference),
        "the Event names the image: {note}"
    );
    let released = wait_pod(&pods, "down", "released", |p| gates(p).is_empty()).await;
    registry.resume().expect("the registry thawed");
    assert_eq!(annotation(&released, OUTCOME_ANNOTATION), "Unconstrained");
    wait_event(&client, "Pod", "down", "ReleasedUnconstrained").await;

    // The status counts the pods each policy gated.
    wait_status(&client, &controller, "default", 6).await;
    wait_status(&client, &controller, "fail-open", 1).await;

    // Every replica down, under the chart's failurePolicy (Ignore): a new pod is created
    // without the gate and scheduled as without ocifit; nothing waits for ocifit.
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            "ocifit-placement",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([
                    {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}
                ]))
                .expect("a patch"),
            ),
        )
        .await
        .expect("failurePolicy Ignore");
    assert!(controller.stop().await.success());
    let ungated = pods
        .create(
            &PostParams::default(),
            &pod(
                "while-down",
                json!({}),
                &[("web", &web.reference), ("metrics", &metrics.reference)],
            ),
        )
        .await
        .expect("created while ocifit is down");
    assert!(
        gates(&ungated).is_empty(),
        "never gated while ocifit is down"
    );
    wait_pod(&pods, "while-down", "bound", |p| node_name(p).is_some()).await;
}

/// Waits until policy `name` is Ready with `released` pods released and none gated.
async fn wait_status(client: &kube::Client, controller: &Controller, name: &str, released: i32) {
    let policies: Api<PlacementPolicy> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let status = policies.get(name).await.expect("the policy").status;
        let done = status.as_ref().is_some_and(|s| {
            s.pods.released == released
                && s.pods.gated == 0
                && s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if done {
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "status of {name}: {status:?}; log:\n{}",
            controller.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
