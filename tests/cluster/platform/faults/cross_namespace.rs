//! One namespace's cache against another namespace, on a real node with the chart installed: the
//! cache of `workflow` (A) holds an artifact its own step pushed with the credentials ocifit
//! generated; from this machine (on the node's network) its catalog, manifest and blob answer 401
//! without them; a step of `tenant-b` (B) naming A's registry is refused exactly as one naming a
//! host that is nothing, one naming the cache by name finds none in B, and A's tag still has its
//! digest; a cache in a namespace enforcing Pod Security `restricted` becomes Ready. Prints
//! `FAULT cross-namespace …` lines.

use std::time::Instant;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::{ArtifactCache, step};
use ocifit_testkit::{Tool, Tools};
use serde_json::{Value, json};

use crate::artifact_cache::workflow::{
    ReadyCache, anonymous_status, cache_access, create_cache_in, job, ready_cache, run_first_step,
    stage, wait_ready,
};

const B: &str = "tenant-b";
const RESTRICTED: &str = "restricted";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

#[tokio::test]
async fn another_namespaces_steps_and_pods_cannot_read_or_write_a_cache() {
    let stage = stage().await;

    // A is the workflow namespace the stage opted in.
    let ReadyCache { endpoint, jobs, .. } =
        ready_cache(&stage, json!({"image": stage.cache_image})).await;
    let writes = job(
        "private",
        &stage.step,
        &[
            ("output-uri", "workflow/private:v1"),
            ("output-pipe", "out/said.txt"),
        ],
        "echo for tenant a only",
    );
    run_first_step(&stage.cluster, &jobs, &writes).await;

    // Through the registry pod's address on the node's network (the CNI bridge here enforces no
    // NetworkPolicy): only the credentials keep others out.
    let access = cache_access(&stage.client).await;
    let (address, login) = (&access.address, access.login());
    let (status, catalog) = get(address, "/v2/_catalog", login);
    assert_eq!(status, 200, "{catalog}");
    assert!(catalog.contains("workflow/private"), "{catalog}");
    let manifest_path = "/v2/workflow/private/manifests/v1";
    let (status, manifest) = get(address, manifest_path, login);
    assert_eq!(status, 200, "{manifest}");
    let manifest: Value = serde_json::from_str(&manifest).expect("a manifest");
    let layer = manifest["layers"][0]["digest"]
        .as_str()
        .expect("a layer digest");
    let blob_path = format!("/v2/workflow/private/blobs/{layer}");
    assert_eq!(get(address, &blob_path, login).0, 200);
    let digest_before = manifest_digest(address, manifest_path, login);

    let anonymous = [
        ("catalog", "/v2/_catalog".to_owned()),
        ("manifest", manifest_path.to_owned()),
        ("blob", blob_path.clone()),
    ]
    .map(|(what, path)| (what, anonymous_status(address, &path)));
    for (what, status) in anonymous {
        println!(
            "FAULT cross-namespace: {what} of A's cache without its credentials: HTTP {status}"
        );
        assert_eq!(status, 401, "{what}");
    }

    // Namespace B, opted in to the step webhooks like A.
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {"name": B, "labels": {step::NAMESPACE_OPT_IN: step::NAMESPACE_OPT_IN_VALUE}}
    }))
    .expect("a namespace");
    Api::<Namespace>::all(stage.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace B");
    let b_jobs = Api::<Job>::namespaced(stage.client.clone(), B);
    let refusal = async |name: &str, annotations: &[(&str, &str)]| {
        let overwrite = job(
            name,
            &stage.step,
            annotations,
            "echo overwritten by tenant b",
        );
        match b_jobs.create(&PostParams::default(), &overwrite).await {
            Err(kube::Error::Api(status)) => status.message,
            other => panic!("a step of B aimed at A is refused: {other:?}"),
        }
    };
    let push = [
        ("output-uri", "workflow/private:v1"),
        ("output-pipe", "out/said.txt"),
    ];
    let at_a = format!("http://{endpoint}");
    let nothing = "http://192.0.2.1:5000";
    let to_a = refusal(
        "to-a",
        &[&push[..], &[("registry", at_a.as_str())]].concat(),
    )
    .await;
    let to_nothing = refusal(
        "to-nothing",
        &[&push[..], &[("registry", nothing)]].concat(),
    )
    .await;
    println!("FAULT cross-namespace: a step of B naming A's registry {endpoint}: refused: {to_a}");
    assert!(to_a.contains("is not an allowed registry"), "{to_a}");
    assert_eq!(
        to_a.replace(&endpoint, "HOST"),
        to_nothing.replace("192.0.2.1:5000", "HOST"),
        "A's registry and a host that is nothing get one answer"
    );
    let by_name = refusal("by-name", &[&push[..], &[("oras-cache", "oras")]].concat()).await;
    println!("FAULT cross-namespace: a step of B naming cache oras: refused: {by_name}");
    assert!(
        by_name.contains(&format!("does not exist in namespace \"{B}\"")),
        "{by_name}"
    );
    let digest_after = manifest_digest(address, manifest_path, login);
    println!(
        "FAULT cross-namespace: A's tag workflow/private:v1 before {digest_before}, after {digest_after}"
    );
    assert_eq!(digest_before, digest_after);

    // A namespace enforcing Pod Security `restricted` runs its cache's registry.
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {"name": RESTRICTED, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}
    }))
    .expect("a namespace");
    Api::<Namespace>::all(stage.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("the restricted namespace");
    let restricted = Api::<ArtifactCache>::namespaced(stage.client.clone(), RESTRICTED);
    let since = Instant::now();
    create_cache_in(&restricted, json!({"image": stage.cache_image})).await;
    let at = wait_ready(&stage.cluster, &restricted).await;
    println!(
        "FAULT cross-namespace: a cache under Pod Security restricted Ready at {at} in {:.1} s",
        since.elapsed().as_secs_f64()
    );
}

/// (HTTP status, body) of `path` at the registry `address`, with basic auth when `login` is given.
fn get(address: &str, path: &str, login: Option<(&str, &str)>) -> (u16, String) {
    let (status, _, body) = request(address, path, login);
    (status, body)
}

/// The `Docker-Content-Digest` of a manifest.
fn manifest_digest(address: &str, path: &str, login: Option<(&str, &str)>) -> String {
    let (status, digest, body) = request(address, path, login);
    assert_eq!(status, 200, "{body}");
    digest
}

fn request(address: &str, path: &str, login: Option<(&str, &str)>) -> (u16, String, String) {
    let script = r#"
import base64, json, sys, urllib.request, urllib.error
import os
url, accept = sys.argv[1:3]
user, password = os.environ.get("LOGIN_USER", ""), os.environ.get("LOGIN_PASSWORD", "")
request = urllib.request.Request(url, headers={"Accept": accept})
if user:
    token = base64.b64encode((user + ":" + password).encode()).decode()
    request.add_header("Authorization", "Basic " + token)
try:
    response = urllib.request.urlopen(request)
    status, headers, body = response.status, response.headers, response.read()
except urllib.error.HTTPError as e:
    status, headers, body = e.code, e.headers, e.read()
print(json.dumps([status, headers.get("Docker-Content-Digest", ""), body.decode(errors="replace")]))
"#;
    let python = Tools::locate()
        .expect("the tools cache")
        .path(Tool::OrasPython)
        .expect("the ORAS Python SDK's Python");
    let (user, password) = login.unwrap_or(("", ""));
    let output = std::process::Command::new(python)
        .args([
            "-c",
            script,
            &format!("http://{address}{path}"),
            OCI_MANIFEST,
        ])
        .env("LOGIN_USER", user)
        .env("LOGIN_PASSWORD", password)
        .output()
        .expect("python runs");
    let answer: (u16, String, String) = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    answer
}
