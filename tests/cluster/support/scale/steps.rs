//! The artifact cache in the scale run: an ArtifactCache in a namespace of its own, opted in to the
//! step webhooks (`/artifacts/pods`, `/artifacts/jobs`) as the chart registers them, and workflow
//! steps — bare pods and Jobs with the oras-operator's annotations — created among the steady
//! pods. kwok runs the step pods as fakes, so what is checked is the injection (the marker
//! annotation and ocifit's helper containers), not a transfer.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use ocifit::api::{ArtifactCache, step};
use serde_json::{Value, json};

use crate::Env;

/// Where the cache and the steps are: a namespace the placement gate and image selection never
/// see, so the steps' admissions are the step webhooks' alone.
pub const NAMESPACE: &str = "scale-steps";
/// The step webhooks' names, as the apiserver labels its histogram (the chart's names).
pub const STEP_PODS: &str = "pods.steps.artifacts.ocifit.io";
pub const STEP_JOBS: &str = "jobs.steps.artifacts.ocifit.io";
/// `--artifact-helper-image`: never pulled, kwok runs the step pods as fakes.
pub const HELPER_IMAGE: &str = "registry.example/ocifit:scale";
/// How long the cache's registry (a kwok pod) may take to be Ready, and the webhooks to be active.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// One workflow step to create: a bare pod or a Job (whose one pod the Job controller creates).
pub enum Step {
    Pod(Box<Pod>),
    Job(Box<Job>),
}

impl Step {
    /// Step `i`: a bare pod when `i` is even, a Job when odd; its name and object.
    pub fn numbered(i: usize) -> (String, Step) {
        if i.is_multiple_of(2) {
            let name = format!("step-pod-{i}");
            let pod = serde_json::from_value(json!({
                "metadata": {"name": name, "annotations": contract(i)},
                "spec": spec(),
            }))
            .expect("a step pod");
            (name, Step::Pod(Box::new(pod)))
        } else {
            let name = format!("step-job-{i}");
            let job = serde_json::from_value(json!({
                "metadata": {"name": name, "annotations": contract(i)},
                "spec": {"backoffLimit": 0, "template": {"spec": spec()}},
            }))
            .expect("a step Job");
            (name, Step::Job(Box::new(job)))
        }
    }

    /// Creates the step in [`NAMESPACE`]; whether the apiserver admitted it.
    pub async fn create(self, client: Client) -> bool {
        let params = PostParams::default();
        match self {
            Step::Pod(pod) => Api::<Pod>::namespaced(client, NAMESPACE)
                .create(&params, &pod)
                .await
                .is_ok(),
            Step::Job(job) => Api::<Job>::namespaced(client, NAMESPACE)
                .create(&params, &job)
                .await
                .is_ok(),
        }
    }
}

/// Step `i`'s annotations: one input (step `i - 1`'s output, as a workflow chains them) and one
/// output, in the namespace's cache `oras` (the contract's default).
fn contract(i: usize) -> Value {
    let mut annotations = serde_json::Map::new();
    let mut put = |key: &str, value: String| {
        annotations.insert(format!("{}{key}", step::PREFIX), Value::from(value));
    };
    put(step::OUTPUT_URI, format!("scale/step-{i}:v1"));
    put(step::OUTPUT_PIPE, "out.txt".to_owned());
    if i > 0 {
        put(step::INPUT_URI, format!("scale/step-{}:v1", i - 1));
    }
    Value::Object(annotations)
}

fn spec() -> Value {
    json!({
        "restartPolicy": "Never",
        "containers": [{"name": "step", "image": "busybox:1.36", "command": ["sh", "-c", "echo step"]}],
    })
}

/// The opted-in namespace, its ArtifactCache Ready (kwok runs the registry's pod), and the step
/// webhooks of `address` registered and active.
pub async fn arrange(env: &Env, address: &str, ca_pem: &str) {
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {"name": NAMESPACE, "labels": {step::NAMESPACE_OPT_IN: step::NAMESPACE_OPT_IN_VALUE}}
    }))
    .expect("a namespace");
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("the steps' namespace");
    let caches = Api::<ArtifactCache>::namespaced(env.client.clone(), NAMESPACE);
    let cache: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": step::DEFAULT_CACHE}, "spec": {},
    }))
    .expect("a cache");
    caches
        .create(&PostParams::default(), &cache)
        .await
        .expect("the cache");
    let start = Instant::now();
    loop {
        let cache = caches.get(step::DEFAULT_CACHE).await.expect("the cache");
        let ready = cache.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status == "True")
        });
        if ready == Some(true) {
            break;
        }
        assert!(
            start.elapsed() < READY_WITHIN,
            "the cache not Ready within {READY_WITHIN:?}: {:?}",
            cache.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .create(&PostParams::default(), &configuration(address, ca_pem))
        .await
        .expect("the step webhooks' configuration");
    activate(&env.client).await;
}

/// Both step webhooks as the chart registers them, calling `address`.
fn configuration(address: &str, ca_pem: &str) -> MutatingWebhookConfiguration {
    let webhook = |kind: &str, group: &str| {
        json!({
            "name": format!("{kind}.steps.artifacts.ocifit.io"),
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
            "reinvocationPolicy": "Never",
            "matchPolicy": "Equivalent",
            "clientConfig": {
                "url": format!("https://{address}/artifacts/{kind}"),
                "caBundle": base64(ca_pem.as_bytes()),
            },
            "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": [kind], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {step::NAMESPACE_OPT_IN: step::NAMESPACE_OPT_IN_VALUE}},
            "objectSelector": {"matchExpressions": [
                {"key": "app.kubernetes.io/managed-by", "operator": "NotIn", "values": ["ocifit"]}
            ]},
        })
    };
    serde_json::from_value(json!({
        "metadata": {"name": "ocifit-scale-steps"},
        "webhooks": [webhook("pods", ""), webhook("jobs", "batch")],
    }))
    .expect("a webhook configuration")
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Waits until a dry-run step pod and a dry-run step Job both come back injected.
async fn activate(client: &Client) {
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let jobs = Api::<Job>::namespaced(client.clone(), NAMESPACE);
    let (Step::Pod(pod), Step::Job(job)) = (Step::numbered(0).1, Step::numbered(1).1) else {
        unreachable!("step 0 is a pod, step 1 a Job")
    };
    let start = Instant::now();
    loop {
        let pod = pods.create(&dry_run, &pod).await;
        let job = jobs.create(&dry_run, &job).await;
        let pod_injected = pod.as_ref().is_ok_and(|p| marked(&p.metadata));
        let job_injected = job
            .as_ref()
            .ok()
            .and_then(|j| j.spec.as_ref()?.template.metadata.as_ref())
            .is_some_and(marked);
        if pod_injected && job_injected {
            return;
        }
        assert!(
            start.elapsed() < READY_WITHIN,
            "the step webhooks never injected a dry-run step: {:?} / {:?}",
            pod.err(),
            job.err()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn marked(metadata: &kube::api::ObjectMeta) -> bool {
    metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(step::INJECTED))
}

/// Waits (`within` at most) until the namespace holds a pod for each of `steps` steps (the Job
/// controller creates the Jobs' pods); how many there are, and each that was not injected: no
/// marker annotation, or no container of the helper image.
pub async fn uninjected(client: &Client, steps: usize, within: Duration) -> (usize, Vec<String>) {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let theirs = ListParams::default().labels("app.kubernetes.io/managed-by!=ocifit");
    let start = Instant::now();
    let listed = loop {
        let listed = pods.list(&theirs).await.expect("the step pods");
        if listed.items.len() >= steps || start.elapsed() > within {
            break listed.items;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let helped = |pod: &Pod| {
        pod.spec.as_ref().is_some_and(|s| {
            s.init_containers
                .iter()
                .flatten()
                .any(|c| c.image.as_deref() == Some(HELPER_IMAGE))
        })
    };
    let wrong = listed
        .iter()
        .filter(|pod| !(marked(&pod.metadata) && helped(pod)))
        .filter_map(|pod| pod.metadata.name.clone())
        .collect();
    (listed.len(), wrong)
}
