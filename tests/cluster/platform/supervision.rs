//! `ocifit run`'s supervision on the real cluster: the process composed exactly as `ocifit run`
//! composes it (in process, so one of its tasks can be made to fail), a task failing while it
//! serves, and what must follow: `/livez` and `/readyz` fail, the other tasks stop, the Lease is
//! released, and the end names the task and why (the binary then exits 1). And a missing
//! prerequisite is one line naming the fix.

use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use ocifit::startup::Ended;
use ocifit::startup::{Config, RunArgs, start};
use ocifit_testkit::pki::CertificateAuthority;
use tokio::sync::oneshot;

use crate::support::{Env, free_address, get, ocifit_binary};

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    run: RunArgs,
}

/// `ocifit run`'s configuration for `env`, as the binary would read these flags.
fn config(env: &Env, admin: &str) -> Config {
    let dir = env.cluster.dir();
    let ca = CertificateAuthority::new("supervision CA").expect("a CA");
    let serving = ca
        .issue_server("ocifit-webhook", &["127.0.0.1"])
        .expect("a serving certificate");
    std::fs::write(dir.join("tls.crt"), &serving.cert_pem).expect("the certificate");
    std::fs::write(dir.join("tls.key"), &serving.key_pem).expect("the key");
    let (cert, key) = (
        dir.join("tls.crt").display().to_string(),
        dir.join("tls.key").display().to_string(),
    );
    let webhook = free_address();
    let mut flags = Flags::parse_from([
        "ocifit",
        "--admin-bind-address",
        admin,
        "--webhook-bind-address",
        &webhook,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--identity",
        "supervised",
        "--lease-namespace",
        "ocifit-system",
    ]);
    // The cluster flags are the command line's global ones, which `ocifit` hands to `run`.
    flags.run.kube.kubeconfig = Some(env.cluster.kubeconfig().to_path_buf());
    Config::from_args(&flags.run).expect("a usable configuration")
}

async fn lease_holder(env: &Env) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), "ocifit-system");
    leases
        .get("ocifit-controller")
        .await
        .ok()?
        .spec?
        .holder_identity
        .filter(|holder| !holder.is_empty())
}

/// Runs the composed process with `task` made to fail (panic, or end) once it is ready; what the
/// supervisor returned.
async fn fail_while_serving(task: &'static str, panics: bool) -> Ended {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let admin = free_address();
    let mut process = start(config(&env, &admin)).await.expect("ocifit starts");
    let at = process
        .tasks
        .iter()
        .position(|(name, _)| *name == task)
        .unwrap_or_else(|| panic!("no task {task} in ocifit run"));
    let (name, real) = process.tasks.remove(at);
    let (fail, failed) = oneshot::channel::<()>();
    process.tasks.push((
        name,
        Box::pin(async move {
            tokio::select! {
                () = real => {}
                _ = failed => if panics { panic!("made to fail by the test") },
            }
        }),
    ));
    let health = process.health.clone();
    let running = tokio::spawn(process.supervise(std::future::pending()));

    let started = Instant::now();
    while get(&admin, "/readyz").await.map(|(code, _)| code) != Some(200) {
        assert!(started.elapsed() < Duration::from_secs(30), "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(&admin, "/livez").await.map(|(code, _)| code), Some(200));
    let waited = Instant::now();
    while lease_holder(&env).await.is_none() {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "the Lease was never taken"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    fail.send(()).expect("the task is running");
    let ended = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the process stops within 30 s")
        .expect("the supervisor returns");
    assert!(!health.live(), "liveness fails");
    assert!(!health.ready(), "readiness fails");
    assert_eq!(lease_holder(&env).await, None, "the Lease is released");
    ended
}

#[tokio::test]
async fn a_panicking_controller_fails_liveness_releases_the_lease_and_is_named() {
    let ended = fail_while_serving("controller", true).await;
    assert_eq!(
        ended,
        Ended::Failed {
            task: "controller",
            why: "panicked: made to fail by the test".to_owned()
        }
    );
}

#[tokio::test]
async fn an_index_feed_that_ends_fails_liveness_releases_the_lease_and_is_named() {
    let ended = fail_while_serving("admission index feed", false).await;
    assert_eq!(
        ended,
        Ended::Failed {
            task: "admission index feed",
            why: "ended".to_owned()
        }
    );
}

#[tokio::test]
async fn a_missing_lease_namespace_is_one_line_naming_the_fix() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let kubeconfig = env.cluster.kubeconfig().display().to_string();
    let admin = free_address();
    let out = tokio::process::Command::new(ocifit_binary())
        .args([
            "run",
            "--kubeconfig",
            &kubeconfig,
            "--admin-bind-address",
            &admin,
            "--lease-namespace",
            "no-such-namespace",
        ])
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("ocifit run");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert!(
        errors[0].contains(
            "the namespace no-such-namespace of the leader-election Lease does not exist: create it"
        ),
        "{log}"
    );
}
