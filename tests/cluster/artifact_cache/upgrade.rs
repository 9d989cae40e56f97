//! A cache whose generated Secret predates the pull/push split, on a real node through the chart:
//! its Secret holds one user (`ORAS_USER` `steps`, the same password under `ORAS_PULL_PASS` and
//! `ORAS_PUSH_PASS`, no `ORAS_PUSH_USER`) and its registry that user's htpasswd line, as the
//! previous ocifit made them. A step that pulls and pushes still starts and pushes, as that user;
//! the ORAS SDK reads its artifact back with the one login.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use ocifit::api::ArtifactCache;
use ocifit_testkit::{htpasswd_line, wait_for_pod_ready};
use serde_json::json;

use crate::artifact_cache::workflow::{
    ReadyCache, WORKFLOW, cache_address, eventually, job, live_registry_pod, ready_cache,
    registry_pod, run_job, sdk_pull, stage,
};

const USER: &str = "steps";
const PASSWORD: &str = "one-password-of-a-cache-from-before";

#[tokio::test]
async fn steps_of_a_cache_whose_secret_predates_the_split_still_push() {
    let stage = stage().await;
    let ReadyCache { caches, jobs, .. } =
        ready_cache(&stage, json!({"image": stage.cache_image})).await;
    let secrets = Api::<Secret>::namespaced(stage.client.clone(), WORKFLOW);
    let name = credentials_secret(&caches).await;

    // The Secret as the previous ocifit generated it, and its registry started on it.
    let mut secret = secrets.get(&name).await.expect("the credentials Secret");
    let htpasswd = htpasswd_line(USER, PASSWORD).expect("an htpasswd line");
    secret.data = Some(BTreeMap::from(
        [
            ("htpasswd", htpasswd.as_str()),
            ("ORAS_USER", USER),
            ("ORAS_PULL_PASS", PASSWORD),
            ("ORAS_PUSH_PASS", PASSWORD),
        ]
        .map(|(key, value)| (key.to_owned(), ByteString(value.as_bytes().to_vec()))),
    ));
    secrets
        .replace(&name, &PostParams::default(), &secret)
        .await
        .expect("the Secret in the old format");
    let old = registry_pod(&stage.client).await;
    let old_uid = old.metadata.uid.clone();
    let pods = Api::<Pod>::namespaced(stage.client.clone(), WORKFLOW);
    pods.delete(
        old.metadata.name.as_deref().expect("a name"),
        &DeleteParams::default(),
    )
    .await
    .expect("the registry's pod deleted, to read the old htpasswd");
    let restarted = eventually("the registry's new pod", async || {
        let pod = live_registry_pod(&stage.client).await?;
        (pod.metadata.uid != old_uid).then_some(pod)
    })
    .await;
    let restarted_name = restarted.metadata.name.expect("a name");
    wait_for_pod_ready(
        &stage.client,
        WORKFLOW,
        &restarted_name,
        Duration::from_secs(180),
    )
    .await
    .expect("the registry Ready on the old htpasswd");

    // A step that pushes: its sidecar starts (no `ORAS_PUSH_USER` needed) and pushes as `steps`.
    let pushes = job(
        "pushes-as-the-one-user",
        &stage.step,
        &[("output-uri", "workflow/before:v1"), ("output-path", "out")],
        "echo kept > out/kept.txt",
    );
    run_job(&stage.cluster, &jobs, &pushes, true).await;
    // And one that pulls it back in, then pushes again.
    let pulls = job(
        "pulls-and-pushes",
        &stage.step,
        &[
            ("input-uri", "workflow/before:v1"),
            ("input-path", "/inputs"),
            ("output-uri", "workflow/after:v1"),
            ("output-path", "out"),
        ],
        "cat /inputs/out/kept.txt > out/again.txt",
    );
    run_job(&stage.cluster, &jobs, &pulls, true).await;

    let address = cache_address(&stage.client).await;
    let pulled = tempfile::tempdir().expect("a temp dir");
    sdk_pull(
        &address,
        "workflow/after:v1",
        pulled.path(),
        Some((USER, PASSWORD)),
    );
    assert_eq!(
        std::fs::read_to_string(pulled.path().join("out/again.txt")).expect("out/again.txt"),
        "kept\n"
    );
    eprintln!("a cache with a one-user Secret: both steps pushed as {USER}, read back");
}

async fn credentials_secret(caches: &Api<ArtifactCache>) -> String {
    let cache = caches.get("oras").await.expect("the cache");
    cache
        .status
        .and_then(|s| s.credentials_secret)
        .expect("the cache's credentials Secret")
}
