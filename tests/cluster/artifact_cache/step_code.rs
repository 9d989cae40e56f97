//! Step code against ocifit's helpers, on a real node with the chart installed from ocifit's own
//! image: a step whose output is a symbolic link to `/proc/self/environ` fails saying so and
//! pushes nothing; a step whose output directory holds such a link pushes the link as a link; a
//! step that forges the hand-off (a request naming a directory of links to the pushing sidecar's
//! own environment, which holds the cache's generated push credentials) gets a refusal, never a push. Every
//! artifact is read back with the ORAS Python SDK from the host, and no file in any of them holds
//! an environment: not the sidecar's credentials, not the step's own variables.

use std::path::Path;

use serde_json::json;

use crate::artifact_cache::workflow::{
    ReadyCache, cache_access, container_state, job, job_pod, ready_cache, run_job, sdk_pull,
    sdk_pull_fails, stage_with, wait_step_webhook,
};

/// A variable every container the kubelet starts has: the mark of an environment.
const ENVIRONMENT_MARK: &str = "KUBERNETES_SERVICE_HOST=";

#[tokio::test]
async fn step_code_cannot_make_the_helpers_push_an_environment() {
    let stage = stage_with(&[]).await;
    let ReadyCache { jobs, .. } = ready_cache(&stage, json!({"image": stage.cache_image})).await;
    // The cache's generated credentials: in the helpers' environment, never in the step's.
    let access = cache_access(&stage.client).await;
    let (cache, login) = (&access.address, access.login());
    let pulled = tempfile::tempdir().expect("a temp dir");

    // The output itself is a link to the environment: the step fails, saying so.
    let linked = job(
        "output-is-a-link",
        &stage.step,
        &[
            ("output-uri", "workflow/linked:v1"),
            ("output-path", "out/env"),
        ],
        "busybox ln -s /proc/self/environ out/env",
    );
    wait_step_webhook(&jobs, &linked).await;
    run_job(&stage.cluster, &jobs, &linked, false).await;
    let pod = job_pod(&stage.client, "output-is-a-link").await;
    let terminated = container_state(&pod, "step")
        .and_then(|s| s.terminated)
        .expect("the step terminated");
    let message = terminated.message.unwrap_or_default();
    assert_eq!(terminated.exit_code, 75, "{message}");
    assert!(message.contains("is a symbolic link"), "{message}");
    let missing = sdk_pull_fails(cache, "workflow/linked:v1", pulled.path(), login);
    eprintln!("an output that is a link: exit 75, {message:?}; nothing pushed ({missing})");

    // The output directory holds a link to the environment: pushed as a link.
    let holds = job(
        "output-holds-a-link",
        &stage.step,
        &[("output-uri", "workflow/holds:v1"), ("output-path", "out")],
        "echo real > out/real.txt && busybox ln -s /proc/self/environ out/env",
    );
    run_job(&stage.cluster, &jobs, &holds, true).await;
    let holds_dir = pulled.path().join("holds");
    sdk_pull(cache, "workflow/holds:v1", &holds_dir, login);
    assert_eq!(
        std::fs::read_link(holds_dir.join("out/env")).expect("out/env is a link"),
        Path::new("/proc/self/environ")
    );
    assert_eq!(
        std::fs::read_to_string(holds_dir.join("out/real.txt")).expect("out/real.txt"),
        "real\n"
    );

    // The step forges the hand-off: a request naming a directory of links to the sidecar's
    // environment. It keeps the sidecar's answer in its own output, which is pushed.
    let forges = job(
        "forges-the-hand-off",
        &stage.step,
        &[("output-uri", "workflow/forges:v1"), ("output-path", "out")],
        r#"mkdir -p /ocifit/run/planted /ocifit/run/outputs-forged
busybox ln -s /proc/self/environ /ocifit/run/planted/environ
busybox ln -s /proc/self/environ /ocifit/run/outputs-forged/environ
echo '{"id":"forged","outputs":"planted"}' > /ocifit/run/.forged
busybox mv /ocifit/run/.forged /ocifit/run/request
i=0
while [ ! -e /ocifit/run/result-forged ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
cat /ocifit/run/result-forged > out/answer.json"#,
    );
    run_job(&stage.cluster, &jobs, &forges, true).await;
    let forges_dir = pulled.path().join("forges");
    sdk_pull(cache, "workflow/forges:v1", &forges_dir, login);
    let answer = std::fs::read_to_string(forges_dir.join("out/answer.json"))
        .expect("the sidecar answered the forged request");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("an answer");
    eprintln!("the sidecar's answer to a forged request: {answer}");
    assert!(
        answer.get("failed").is_some(),
        "the sidecar pushed for a forged request: {answer}"
    );

    // Nothing pushed holds an environment.
    let mut scanned = 0;
    for (path, content) in regular_files(pulled.path()) {
        scanned += 1;
        let text = String::from_utf8_lossy(&content);
        assert!(
            !text.contains(&access.password) && !text.contains(ENVIRONMENT_MARK),
            "{} holds an environment: {text}",
            path.display()
        );
    }
    eprintln!("read back with the ORAS SDK: {scanned} files, no environment in any");
}

/// Every regular file under `root` (links are not followed), with its content.
fn regular_files(root: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory").flatten() {
            let path = entry.path();
            let kind = std::fs::symlink_metadata(&path)
                .expect("its metadata")
                .file_type();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let content = std::fs::read(&path).expect("its content");
                found.push((path, content));
            }
        }
    }
    found
}
