//! What the placement scenarios share: `ocifit run` serving `/placement` (a certificate from a
//! test CA, a webhook configuration for one namespace, waited on until it gates), pods and
//! policies written as JSON, and waits on pods and their Events.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use ocifit::api::PlacementPolicy;
use ocifit::api::PodCounts;
use ocifit::api::placement_pod::SCHEDULING_GATE;
use ocifit_testkit::image::ImageBuilder;
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{
    Cluster, PodWebhook, RealNode, TestPod, register_pod_webhook, wait_until_admitted,
};
use serde_json::json;

use super::webhook::WebhookCertificate;
use super::{Controller, Env, free_address};

/// How long a scenario waits for anything.
pub const WAIT: Duration = Duration::from_secs(30);
/// Long enough for an image's pull and a container's first start on the real node of a loaded
/// machine.
pub const FIRST_FAILURE: Duration = Duration::from_secs(120);

/// `ocifit run` with its admission host on 127.0.0.1, and the CA its certificate is from.
pub struct Served {
    pub controller: Controller,
    pub address: String,
    pub ca: CertificateAuthority,
}

/// Starts `ocifit run` with a serving certificate (and `extra` flags).
pub async fn serve(env: &Env, identity: &str, extra: &[&str]) -> Served {
    let certificate = WebhookCertificate::issue(env, &["127.0.0.1"]);
    let address = free_address();
    let controller = certificate.serve(env, identity, &address, extra).await;
    Served {
        controller,
        address,
        ca: certificate.ca,
    }
}

impl Served {
    /// Registers `/placement` as webhook configuration `name` for pods of `namespace`, and
    /// waits until a pod of `image` is gated at admission.
    pub async fn gate(&self, client: &Client, name: &str, namespace: &str, image: &str) {
        let webhook = PodWebhook::new(
            name,
            &format!("https://{}/placement", self.address),
            self.ca.cert_pem(),
        )
        .in_namespace(namespace);
        register_pod_webhook(client, &webhook)
            .await
            .expect("the webhook configuration");
        let probe = pod("probe", namespace, json!({}), &[("web", image)]);
        wait_until_admitted(client, namespace, &probe, WAIT, |p| {
            gates(p) == [SCHEDULING_GATE]
        })
        .await
        .expect("the gate webhook active");
    }
}

/// A pod in `namespace` with these labels (a JSON object of strings) and one container per
/// `(name, image)`.
pub fn pod(
    name: &str,
    namespace: &str,
    labels: serde_json::Value,
    containers: &[(&str, &str)],
) -> Pod {
    let mut pod = TestPod::named(name)
        .in_namespace(namespace)
        .containers(containers);
    for (key, value) in labels.as_object().into_iter().flatten() {
        pod = pod.label(key, value.as_str().expect("label values are strings"));
    }
    pod.build()
}

/// A cluster running `ocifit` whose pods really run (every controller, and the real node `node`
/// of this machine's architecture) with `namespace` created and `image` pushed as `repository:v1`, ocifit serving
/// `/placement` as `identity` and gating `namespace`; the env, the server and the image's
/// reference.
pub async fn on_real_node(
    ocifit: &str,
    node: &str,
    namespace: &str,
    identity: &str,
    (image, repository): (&ImageBuilder, &str),
) -> (Env, Served, String) {
    let env = Env::start_with(
        ocifit,
        Cluster::builder()
            .with_all_controllers()
            .real_node(RealNode::new(node)),
    )
    .await;
    ocifit_testkit::create_namespace(&env.client, namespace)
        .await
        .expect("the namespace");
    let image = env
        .registry()
        .push_built(image, repository, "v1")
        .await
        .expect("the image pushed")
        .reference;
    let served = serve(&env, identity, &[]).await;
    (env, served, image)
}

/// Creates the PlacementPolicy `name` with `spec`.
pub async fn create_policy(client: &Client, name: &str, spec: serde_json::Value) {
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

pub use ocifit_testkit::gates;

/// The pod's annotation `key`, empty when absent.
pub fn annotation(pod: &Pod, key: &str) -> String {
    ocifit_testkit::annotation(pod, key)
        .unwrap_or_default()
        .to_owned()
}

/// The node the pod is bound to.
pub fn node_name(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|spec| spec.node_name.clone())
}

/// Waits until the pod satisfies `done` (`what` names it in the failure); the pod then.
pub async fn wait_pod(pods: &Api<Pod>, name: &str, what: &str, done: impl Fn(&Pod) -> bool) -> Pod {
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

/// Events on object `name` of `kind` in `namespace`: (reason, note).
pub async fn events(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
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

/// Waits for an Event `reason` on the object; its note.
pub async fn wait_event(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
    reason: &str,
) -> String {
    let start = Instant::now();
    loop {
        let seen = events(client, namespace, kind, name).await;
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

/// Creates the ReplicaSet `name` in `namespace` of one pod labelled `app: NAME` with pod spec
/// `spec` (a JSON object); its name.
pub async fn create_replica_set(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
) -> String {
    let set: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}
        }
    }))
    .expect("a ReplicaSet");
    Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &set)
        .await
        .expect("the ReplicaSet created")
        .name_any()
}

/// A container's first failure, as the test saw it in the pod's status.
pub struct Failed {
    pub pod: Pod,
    /// The terminated state's message (empty when the kubelet wrote none).
    pub message: String,
    /// When the test first saw it.
    pub at: Instant,
}

/// The first pod labelled `app: APP` in `namespace` once a container of it has failed, within
/// [`FIRST_FAILURE`].
pub async fn first_failure(client: &Client, namespace: &str, app: &str) -> Failed {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let start = Instant::now();
    loop {
        let listed = pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .expect("pods");
        for pod in listed.items {
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.clone());
            let terminated = statuses.into_iter().flatten().find_map(|status| {
                let current = status.state.and_then(|state| state.terminated);
                let last = status.last_state.and_then(|state| state.terminated);
                current.or(last)
            });
            if let Some(terminated) = terminated {
                return Failed {
                    pod,
                    message: terminated.message.unwrap_or_default(),
                    at: Instant::now(),
                };
            }
        }
        assert!(
            start.elapsed() < FIRST_FAILURE,
            "no container of app {app} failed within {FIRST_FAILURE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `count` of the policy's `status.pods` is at least 1 (`what` names it).
pub async fn wait_policy_count(
    client: &Client,
    name: &str,
    what: &str,
    count: impl Fn(&PodCounts) -> i32,
) {
    let policies: Api<PlacementPolicy> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let policy = policies.get(name).await.expect("the policy");
        if policy.status.is_some_and(|status| count(&status.pods) >= 1) {
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "policy {name}'s status.pods.{what} stayed 0"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
