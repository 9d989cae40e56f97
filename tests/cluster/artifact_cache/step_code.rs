//! Step code against ocifit's helpers, on a real node with the chart installed from ocifit's own
//! image: a step whose output is a symbolic link to `/proc/self/environ` fails saying so and
//! pushes nothing; a step whose output directory holds such a link pushes the link as a link; a
//! step that forges the hand-off (a request naming a directory of links to the pushing sidecar's
//! own environment, which holds the cache's generated push credentials) gets a refusal, never a push. Every
//! artifact is read back with the ORAS Python SDK from the host, and no file in any of them holds
//! an environment: not the sidecar's credentials, not the step's own variables.
//!
//! Step code against the sidecar's process: a pod that pushes with credentials and shares its
//! process namespace is refused; a step running as the helpers' own user, once the sidecar was
//! killed and the kubelet started it again, finds no process of it to read or kill, and nothing of
//! the credentials in `/proc`, the run volume or its environment; the restarted sidecar is
//! non-dumpable (its `/proc/<pid>/environ` root's).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::{Api, Client};
use ocifit::api::ArtifactCache;
use serde_json::json;

use crate::artifact_cache::workflow::{
    ReadyCache, WORKFLOW, cache_access, container_state, job, job_pod, ready_cache, run_job,
    sdk_pull, sdk_pull_fails, stage_with, wait_step_webhook,
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

/// The user the step and its helpers share in the restart test (the pod's `runAsUser`, which the
/// helpers take too).
const SHARED_UID: i64 = 4242;

#[tokio::test]
async fn step_code_cannot_read_the_sidecars_credentials_even_after_it_restarts() {
    let stage = stage_with(&[]).await;
    let ReadyCache { jobs, .. } = ready_cache(&stage, json!({"image": stage.cache_image})).await;
    let access = cache_access(&stage.client).await;
    let (cache, login) = (&access.address, access.login());
    let push_password = generated_key(&stage.client, "ORAS_PUSH_PASS").await;
    let pull_password = generated_key(&stage.client, "ORAS_PULL_PASS").await;
    assert_ne!(
        push_password, pull_password,
        "pull and push share a password"
    );

    // Sharing the process namespace with the sidecar that holds the push credentials is refused.
    let mut shared = job(
        "shares-processes",
        &stage.step,
        &[("output-uri", "workflow/shared:v1"), ("output-path", "out")],
        "echo x > out/x",
    );
    wait_step_webhook(&jobs, &shared).await;
    set_pod_spec(&mut shared, "shareProcessNamespace", json!(true));
    let refused = jobs
        .create(&PostParams::default(), &shared)
        .await
        .expect_err("a step sharing its process namespace with the pusher is refused");
    eprintln!("shareProcessNamespace with credentials: {refused}");
    assert!(
        refused.to_string().contains("shareProcessNamespace"),
        "{refused}"
    );

    // The step waits until the sidecar was killed and started again, then looks for it.
    const MARKER: &str = "workflow/after-restart:v1";
    let mut probe = job(
        "probes-after-restart",
        &stage.step,
        &[("output-uri", MARKER), ("output-path", "out")],
        PROBE,
    );
    set_pod_spec(
        &mut probe,
        "securityContext",
        json!({"runAsUser": SHARED_UID}),
    );
    let restarter = tokio::spawn(restart_sidecar(MARKER));
    run_job(&stage.cluster, &jobs, &probe, true).await;
    let restarted = restarter.await.expect("the restart task");
    eprintln!("{restarted}");

    let pod = job_pod(&stage.client, "probes-after-restart").await;
    let restarts = pod
        .status
        .and_then(|s| s.init_container_statuses)
        .and_then(|all| all.into_iter().find(|c| c.name == "ocifit-push"))
        .map(|c| c.restart_count);
    assert!(
        restarts.is_some_and(|n| n >= 1),
        "the sidecar was not restarted: {restarts:?}"
    );
    let pulled = tempfile::tempdir().expect("a temp dir");
    sdk_pull(cache, MARKER, pulled.path(), login);
    let probe = std::fs::read_to_string(pulled.path().join("out/probe.txt")).expect("the probe");
    eprintln!("what the step saw after the restart:\n{probe}");
    assert!(probe.contains("go: restarted"), "{probe}");
    assert!(
        !probe.contains("artifact deliver"),
        "the step saw the sidecar's process: {probe}"
    );
    assert!(
        !probe.contains(&push_password) && !probe.contains(&pull_password),
        "the step read a cache password: {probe}"
    );
}

/// What the step runs: wait for the go (written once the sidecar restarted), then every process
/// it can see (its command line, environment, memory; a sidecar's is killed), every file of the
/// run volume but the launcher, its own environment: all into `out/probe.txt`, which is pushed.
/// The pattern is escaped so that its own command line (the script) does not match it.
const PROBE: &str = r#"i=0
while [ ! -e /ocifit/run/probe-go ] && [ $i -lt 1500 ]; do sleep 0.1; i=$((i+1)); done
{
echo "go: $(cat /ocifit/run/probe-go)"
for d in /proc/[0-9]*; do
  line=$(tr '\0' ' ' < $d/cmdline 2>&1)
  echo "== $d: $line"
  case "$line" in *artifact\ deliver*) echo "a sidecar: killing it"; busybox kill -9 "${d#/proc/}" 2>&1;; esac
  echo "-- environ:"; tr '\0' '\n' < $d/environ 2>&1
  echo "-- mem:"; busybox head -c 64 $d/mem 2>&1 | tr -cd 'A-Za-z0-9 :/._=-'; echo
done
echo "== the run volume:"
for f in $(busybox find /ocifit/run -path /ocifit/run/bin -prune -o -type f -print); do
  echo "-- $f"; cat "$f" 2>&1
done
echo "== my environment:"; busybox env
} > out/probe.txt 2>&1"#;

/// Sets `field` of a Job's pod template spec.
fn set_pod_spec(job: &mut Job, field: &str, value: serde_json::Value) {
    let mut object = serde_json::to_value(&*job).expect("a Job as JSON");
    object["spec"]["template"]["spec"][field] = value;
    *job = serde_json::from_value(object).expect("a Job");
}

/// A key of the credentials Secret ocifit generated for the workflow namespace's cache.
async fn generated_key(client: &Client, key: &str) -> String {
    let cache = Api::<ArtifactCache>::namespaced(client.clone(), WORKFLOW)
        .get("oras")
        .await
        .expect("the cache");
    let name = cache
        .status
        .and_then(|s| s.credentials_secret)
        .expect("the cache's credentials Secret");
    let secret = Api::<Secret>::namespaced(client.clone(), WORKFLOW)
        .get(&name)
        .await
        .expect("the credentials Secret");
    let data = secret.data.expect("the Secret's data");
    String::from_utf8(data[key].0.clone()).expect("UTF-8")
}

/// The host's processes running `ocifit artifact deliver` to `marker`.
fn sidecars(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let line = String::from_utf8_lossy(&line).replace('\0', " ");
            line.contains("artifact deliver") && line.contains(marker)
        })
        .collect()
}

/// From the host, as the kubelet's restarts look from outside: kills the step's sidecar, waits
/// for the kubelet to start it again, checks the new process is non-dumpable, and tells the step
/// to look (a file in the run volume, written through the new process's root).
async fn restart_sidecar(marker: &'static str) -> String {
    let deadline = Instant::now() + Duration::from_secs(150);
    let wait = |what: &'static str, check: Box<dyn Fn() -> Option<u32> + Send>| {
        wait_for(what, deadline, check)
    };
    let first = wait(
        "the sidecar",
        Box::new(move || sidecars(marker).first().copied()),
    )
    .await;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &first.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success(), "the sidecar {first} was not killed");
    let started = Instant::now();
    let again = wait(
        "the sidecar started again",
        Box::new(move || sidecars(marker).into_iter().find(|pid| *pid != first)),
    )
    .await;
    let restart = started.elapsed().as_secs_f64();
    // Non-dumpable: its environment is root's, though it runs as the step's user.
    let environ = format!("/proc/{again}/environ");
    wait(
        "the restarted sidecar non-dumpable",
        Box::new(move || {
            let owner = std::fs::metadata(&environ).ok()?.uid();
            (owner == 0).then_some(again)
        }),
    )
    .await;
    let status = std::fs::read_to_string(format!("/proc/{again}/status")).unwrap_or_default();
    let uid = format!("\t{SHARED_UID}\t");
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.contains(&uid)),
        "the sidecar does not run as the step's user: {status}"
    );
    // Written aside and renamed in: the step waits for the name, and must never read it empty.
    let run = format!("/proc/{again}/root/ocifit/run");
    std::fs::write(format!("{run}/.probe-go"), "restarted\n")
        .and_then(|()| std::fs::rename(format!("{run}/.probe-go"), format!("{run}/probe-go")))
        .expect("the go is written into the run volume");
    format!(
        "sidecar {first} killed; started again as {again} after {restart:.1} s, running as uid {SHARED_UID}, its environment root's"
    )
}

/// Polls `check` until it finds something, failing at `deadline`.
async fn wait_for(
    what: &str,
    deadline: Instant,
    check: Box<dyn Fn() -> Option<u32> + Send>,
) -> u32 {
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} not seen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
