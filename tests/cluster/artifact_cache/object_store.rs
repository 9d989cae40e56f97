//! A cache on object storage on a real node: a real S3 store (SeaweedFS from the test kit, on this
//! machine's address, where the node's pods reach it) behind a cache with two registry replicas;
//! a two-step workflow through it, with a large artifact, read back byte for byte with the ORAS
//! Python SDK from each replica; a PodDisruptionBudget keeping one replica serving; and a missing
//! bucket, keys the store refuses and an endpoint nothing listens on, each named on its cache.

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use ocifit::api::ArtifactCache;
use ocifit_testkit::{ObjectStore, host_ipv4};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::artifact_cache::workflow::{
    CacheAccess, Stage, WORKFLOW, cache_access, eventually, job, ready_cache, run_first_step,
    run_job, sdk_pull, stage,
};

/// The large artifact's size: big enough that its upload takes several requests' worth of time.
const LARGE: usize = 64 * 1024 * 1024;

pub(crate) async fn store_keys(client: &Client, name: &str, secret_key: &str, store: &ObjectStore) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name},
        "stringData": {"accessKey": store.access_key(), "secretKey": secret_key}
    }))
    .expect("a Secret");
    Api::<Secret>::namespaced(client.clone(), WORKFLOW)
        .create(&PostParams::default(), &secret)
        .await
        .expect("the store's keys are stored");
}

pub(crate) fn s3(bucket: &str, endpoint: &str, keys: &str) -> Value {
    json!({
        "bucket": bucket, "endpoint": endpoint, "forcePathStyle": true,
        "prefix": "/caches/workflow", "credentialsSecretRef": {"name": keys}
    })
}

pub(crate) async fn start_store() -> ObjectStore {
    ObjectStore::builder()
        .listen_on(host_ipv4().expect("this machine's address"))
        .bucket("artifacts")
        .start()
        .await
        .expect("the object store")
}

/// The address of every Ready registry replica of the cache `oras`.
pub(crate) async fn replicas(client: &Client) -> Vec<String> {
    let pods = Api::<Pod>::namespaced(client.clone(), WORKFLOW)
        .list(&ListParams::default().labels("app.kubernetes.io/instance=oras-registry"))
        .await
        .expect("the registry's pods");
    let ready = |pod: &Pod| {
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    };
    pods.items
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none() && ready(pod))
        .filter_map(|pod| Some(format!("{}:5000", pod.status.as_ref()?.pod_ip.as_ref()?)))
        .collect()
}

#[tokio::test]
async fn a_workflow_runs_through_two_registry_replicas_sharing_a_bucket() {
    let stage = stage().await;
    let store = start_store().await;
    store_keys(&stage.client, "store-keys", store.secret_key(), &store).await;
    let since = Instant::now();
    let spec = json!({
        "image": stage.cache_image, "replicas": 2,
        "storage": {"s3": s3("artifacts", &store.endpoint(), "store-keys")}
    });
    let ready = ready_cache(&stage, spec).await;
    let cache = ready.caches.get("oras").await.expect("the cache");
    let status = cache.status.expect("a status");
    assert_eq!(status.storage.as_deref(), Some("s3"));
    let both = eventually("both replicas Ready", async || {
        let replicas = replicas(&stage.client).await;
        (replicas.len() == 2).then_some(replicas)
    })
    .await;
    eprintln!(
        "cache on s3 with 2 Ready replicas: {:.1} s",
        since.elapsed().as_secs_f64()
    );
    let budget = Api::<PodDisruptionBudget>::namespaced(stage.client.clone(), WORKFLOW)
        .get("oras-registry")
        .await
        .expect("the cache's PodDisruptionBudget");
    let allowed = budget.status.map(|s| s.disruptions_allowed);
    eprintln!("PodDisruptionBudget: disruptions allowed {allowed:?}");

    let (one, two) = large_steps(&stage.step, LARGE);
    let took = run_first_step(&stage.cluster, &ready.jobs, &one).await;
    eprintln!("step one pushed {LARGE} B through the Service: {took:.1} s");
    let took = run_job(&stage.cluster, &ready.jobs, &two, true).await;
    eprintln!("step two pulled it back and pushed its check: {took:.1} s");

    // Every replica serves every artifact, whichever replica took the upload.
    read_back_from_each(&stage.client, &both, LARGE).await;
    let deployment = Api::<Deployment>::namespaced(stage.client.clone(), WORKFLOW)
        .get("oras-registry")
        .await
        .expect("the Deployment");
    assert_eq!(deployment.spec.and_then(|s| s.replicas), Some(2));
}

/// The two steps: one writes `size` random bytes and their sum and pushes them as
/// `workflow/large:v1`; two pulls that and pushes the sum it computes as `workflow/checked:v1`.
pub(crate) fn large_steps(image: &str, size: usize) -> (Job, Job) {
    let one = job(
        "step-one",
        image,
        &[("output-uri", "workflow/large:v1"), ("output-path", "out")],
        &format!(
            "head -c {size} /dev/urandom > out/large.bin && sha256sum out/large.bin | cut -d' ' -f1 > out/large.sha256"
        ),
    );
    let two = job(
        "step-two",
        image,
        &[
            ("input-uri", "workflow/large:v1"),
            ("input-path", "/inputs"),
            ("output-uri", "workflow/checked:v1"),
            ("output-pipe", "out/check.txt"),
        ],
        "sha256sum /inputs/out/large.bin | cut -d' ' -f1",
    );
    (one, two)
}

/// Reads both steps' artifacts back with the ORAS SDK from each of `replicas`: the large file of
/// `size` bytes byte for byte (its digest is the one step one wrote beside it and step two
/// computed from its input).
pub(crate) async fn read_back_from_each(client: &Client, replicas: &[String], size: usize) {
    let CacheAccess { user, password, .. } = cache_access(client).await;
    let pulled = tempfile::tempdir().expect("a temp dir");
    for (n, replica) in replicas.iter().enumerate() {
        let login = Some((user.as_str(), password.as_str()));
        let dir = pulled.path().join(format!("replica-{n}"));
        sdk_pull(replica, "workflow/large:v1", &dir.join("large"), login);
        sdk_pull(replica, "workflow/checked:v1", &dir.join("checked"), login);
        let large = std::fs::read(dir.join("large/out/large.bin")).expect("the large file");
        assert_eq!(large.len(), size, "from {replica}");
        let digest = format!("{}\n", hex(&Sha256::digest(&large)));
        let read = |path: &str| std::fs::read_to_string(dir.join(path)).expect(path);
        assert_eq!(read("large/out/large.sha256"), digest, "step one's own sum");
        assert_eq!(read("checked/out/check.txt"), digest, "step two's sum");
    }
}

/// The `Ready` condition of the cache `name` once its reason is `StorageUnavailable`.
async fn unavailable(caches: &Api<ArtifactCache>, name: &str) -> String {
    eventually("the cache's store refusal", async || {
        let cache = caches.get(name).await.ok()?;
        let status = cache.status?;
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
        (ready.reason == "StorageUnavailable" && ready.status == "False")
            .then(|| ready.message.clone())
    })
    .await
}

#[tokio::test]
async fn a_missing_bucket_refused_keys_and_an_unreachable_store_are_each_named_on_the_cache() {
    let Stage {
        client,
        cache_image,
        cluster: _cluster,
        ..
    } = stage().await;
    let store = start_store().await;
    store_keys(&client, "store-keys", store.secret_key(), &store).await;
    store_keys(&client, "wrong-keys", "not-the-secret-key", &store).await;
    let closed =
        std::net::TcpListener::bind((host_ipv4().expect("an address"), 0)).expect("a port");
    let nowhere = format!("http://{}", closed.local_addr().expect("its address"));
    drop(closed);
    let caches = Api::<ArtifactCache>::namespaced(client.clone(), WORKFLOW);
    let cases = [
        (
            "no-bucket",
            s3("absent", &store.endpoint(), "store-keys"),
            "NoSuchBucket",
        ),
        (
            "bad-keys",
            s3("artifacts", &store.endpoint(), "wrong-keys"),
            "SignatureDoesNotMatch",
        ),
        (
            "no-store",
            s3("artifacts", &nowhere, "store-keys"),
            "connection refused",
        ),
    ];
    for (name, s3, _) in &cases {
        let cache: ArtifactCache = serde_json::from_value(json!({
            "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
            "metadata": {"name": name},
            "spec": {"image": cache_image, "storage": {"s3": s3}}
        }))
        .expect("a cache");
        caches
            .create(&PostParams::default(), &cache)
            .await
            .expect("the cache is created");
    }
    let pods = Api::<Pod>::namespaced(client.clone(), WORKFLOW);
    for (name, s3, why) in &cases {
        let message = unavailable(&caches, name).await;
        let (bucket, endpoint) = (s3["bucket"].as_str(), s3["endpoint"].as_str());
        let named = format!(
            "bucket {} at {} does not answer",
            bucket.unwrap_or_default(),
            endpoint.unwrap_or_default()
        );
        assert!(message.contains(&named), "{name}: {message}");
        eprintln!("{name}: {message}");
        // Where the message points: the pod's log, with the store's own answer.
        let pod = message
            .split("its pod ")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .expect("the message names a pod");
        let log = pods
            .logs(pod, &Default::default())
            .await
            .expect("the pod's log");
        let line = log
            .lines()
            .find(|l| l.contains("storage driver health check"))
            .unwrap_or_else(|| panic!("{name}: no health check line in\n{log}"));
        assert!(line.contains(why), "{name}: {why} in {line}");
    }
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
