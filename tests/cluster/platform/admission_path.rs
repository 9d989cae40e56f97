//! The admission path on the real local cluster: pods a Deployment creates (kube-controller-manager,
//! so only `generateName` is set) reach a mutating webhook served by this test over HTTPS on
//! 127.0.0.1 when they carry the opt-in label, and the patched image is what is stored; pods
//! without the label never reach it (objectSelector). The webhook here stands for ocifit's own.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::{Api, Client};
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{
    Cluster, PodWebhook, SharedCluster, create_namespace, register_pod_webhook, wait_until_admitted,
};

use crate::support::https::serve_https;

static CLUSTER: SharedCluster = SharedCluster::new(|| Cluster::builder().with_all_controllers());

const ENABLED: &str = ocifit::api::pod::ENABLED_LABEL;
const PLACEHOLDER: &str = "placeholder:latest";
const PATCHED: &str = "registry.example/app:amd64";
const WAIT: Duration = Duration::from_secs(30);

/// What the webhook was asked to admit.
#[derive(Clone, Debug)]
struct Seen {
    name: String,
    generate_name: Option<String>,
    labels: BTreeMap<String, String>,
    dry_run: bool,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Replaces the placeholder image of the first container; records every request.
async fn admit(request: Request<Incoming>, log: Log) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .expect("request body")
        .to_bytes();
    let review: AdmissionReview<Pod> = serde_json::from_slice(&body).expect("an AdmissionReview");
    let request: AdmissionRequest<Pod> = review.try_into().expect("a review with a request");
    let pod = request.object.as_ref().expect("a pod to admit");
    log.lock().expect("request log").push(Seen {
        name: request.name.clone(),
        generate_name: pod.metadata.generate_name.clone(),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        dry_run: request.dry_run,
    });
    let mut response = AdmissionResponse::from(&request);
    let image = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].image.as_deref());
    if image == Some(PLACEHOLDER) {
        let patch = serde_json::from_value(serde_json::json!([
            {"op": "replace", "path": "/spec/containers/0/image", "value": PATCHED}
        ]))
        .expect("a JSON patch");
        response = response.with_patch(patch).expect("a serialisable patch");
    }
    let review = serde_json::to_vec(&response.into_review()).expect("a serialisable review");
    Ok(Response::new(Full::new(Bytes::from(review))))
}

/// Serves the webhook on 127.0.0.1; its URL and the CA that signed its certificate.
async fn start_webhook(log: Log) -> (String, String) {
    let ca = CertificateAuthority::new("webhook test CA").expect("a CA");
    let tls = ca
        .issue_server("webhook", &["127.0.0.1"])
        .and_then(|cert| cert.server_config())
        .expect("a TLS server configuration");
    let address = serve_https(tls, move |request| admit(request, log.clone())).await;
    (
        format!("https://{address}/mutate"),
        ca.cert_pem().to_owned(),
    )
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn pod_spec() -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "app".into(),
            image: Some(PLACEHOLDER.into()),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

fn deployment(name: &str, replicas: i32, pod_labels: BTreeMap<String, String>) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", name)])),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec()),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// The pods labelled `app=<app>`, once there are `count` of them.
async fn pods_of(client: &Client, namespace: &str, app: &str, count: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = ListParams::default().labels(&format!("app={app}"));
    let deadline = Instant::now() + WAIT;
    loop {
        let found = pods.list(&selector).await.expect("pods listed").items;
        if found.len() == count {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{app}: {} of {count} pods after {WAIT:?}",
            found.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn image(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers[0].image.as_deref())
}

#[tokio::test]
async fn deployment_pods_with_the_label_get_the_patched_image_and_others_never_reach_the_webhook() {
    let cluster = CLUSTER.get().await.unwrap();
    let client = cluster.client().unwrap();
    let namespace = "webhook-deployments";
    create_namespace(&client, namespace).await.unwrap();
    let log = Log::default();
    let (url, ca) = start_webhook(log.clone()).await;
    let webhook = PodWebhook::new("ocifit-test-deployments", &url, &ca)
        .match_label(ENABLED, "true")
        .in_namespace(namespace);
    register_pod_webhook(&client, &webhook).await.unwrap();
    let probe = Pod {
        metadata: ObjectMeta {
            name: Some("probe".into()),
            labels: Some(labels(&[("app", "probe"), (ENABLED, "true")])),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec()),
        ..Pod::default()
    };
    wait_until_admitted(&client, namespace, &probe, WAIT, |pod| {
        image(pod) == Some(PATCHED)
    })
    .await
    .unwrap();

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let selected = deployment(
        "selected",
        2,
        labels(&[("app", "selected"), (ENABLED, "true")]),
    );
    let plain = deployment("plain", 1, labels(&[("app", "plain")]));
    for d in [&selected, &plain] {
        deployments.create(&PostParams::default(), d).await.unwrap();
    }

    let selected_pods = pods_of(&client, namespace, "selected", 2).await;
    let plain_pods = pods_of(&client, namespace, "plain", 1).await;
    for pod in &selected_pods {
        assert_eq!(image(pod), Some(PATCHED), "{:?}", pod.metadata.name);
    }
    assert_eq!(image(&plain_pods[0]), Some(PLACEHOLDER));

    let seen = log.lock().unwrap().clone();
    let created: Vec<&Seen> = seen
        .iter()
        .filter(|s| !s.dry_run && s.labels.get("app").map(String::as_str) == Some("selected"))
        .collect();
    assert_eq!(created.len(), 2, "{seen:?}");
    for request in created {
        assert_eq!(request.name, "", "a ReplicaSet's pod has no name yet");
        assert!(
            request
                .generate_name
                .as_deref()
                .is_some_and(|g| g.starts_with("selected-"))
        );
    }
    assert!(
        !seen
            .iter()
            .any(|s| s.labels.get("app").map(String::as_str) == Some("plain")),
        "an unlabelled pod reached the webhook: {seen:?}"
    );
}
