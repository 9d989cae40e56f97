//! Every subcommand that talks to a cluster finds it as kubectl does, against a real apiserver:
//! `KUBECONFIG=a:b` merged (the current context's user in the second file), `--context` picking
//! a context that is not the current one (after the subcommand or before it), and the in-cluster
//! service account when there is no
//! kubeconfig at all. `ocifit release-gates` (which lists pods) is the probe.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::path::Path;
use std::process::Output;

use kube::config::Kubeconfig;
use ocifit_testkit::Cluster;
use serde_json::{Value, json};

/// `ocifit release-gates ARGS` with only `env` saying where the cluster is: no KUBECONFIG of the
/// caller's, an empty HOME (no `~/.kube/config`), no in-cluster variables.
fn release_gates(args: &[&str], env: &[(&str, &str)], home: &Path) -> Output {
    std::process::Command::new(crate::support::ocifit_binary())
        .arg("release-gates")
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("OCIFIT_KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("HOME", home)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The test kit's kubeconfig as JSON (which is YAML), and its current context's name.
fn admin(cluster: &Cluster) -> (Value, String) {
    let config = Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
    let current = config.current_context.clone().unwrap();
    (serde_json::to_value(&config).unwrap(), current)
}

fn write(path: &Path, value: &Value) -> String {
    std::fs::write(path, serde_json::to_vec(value).unwrap()).unwrap();
    path.display().to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn the_cluster_is_found_as_kubectl_finds_it() {
    let cluster = Cluster::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (config, current) = admin(&cluster);

    // Merged: the first file has the clusters and contexts, the second the users.
    let mut contexts = config.clone();
    contexts["users"] = json!([]);
    let users = json!({"users": config["users"].clone()});
    let merged = format!(
        "{}:{}",
        write(&dir.path().join("contexts"), &contexts),
        write(&dir.path().join("users"), &users)
    );
    let output = release_gates(&[], &[("KUBECONFIG", &merged)], home.path());
    assert!(
        output.status.success(),
        "KUBECONFIG=a:b: {}",
        stderr(&output)
    );
    let first_only = dir.path().join("contexts").display().to_string();
    let output = release_gates(&[], &[("KUBECONFIG", &first_only)], home.path());
    assert!(
        !output.status.success(),
        "the first file alone has no user, so only the merge can have succeeded"
    );

    // --context: the current context names a cluster nothing listens for.
    let mut two = config.clone();
    let mut dead = two["clusters"][0].clone();
    dead["name"] = json!("dead");
    dead["cluster"]["server"] = json!("https://127.0.0.1:1");
    two["clusters"].as_array_mut().unwrap().push(dead);
    let mut elsewhere = two["contexts"][0].clone();
    elsewhere["name"] = json!("elsewhere");
    elsewhere["context"]["cluster"] = json!("dead");
    two["contexts"].as_array_mut().unwrap().push(elsewhere);
    two["current-context"] = json!("elsewhere");
    let file = write(&dir.path().join("two"), &two);
    let output = release_gates(
        &["--context", &current],
        &[("KUBECONFIG", &file)],
        home.path(),
    );
    assert!(
        output.status.success(),
        "--context {current}: {}",
        stderr(&output)
    );
    // Before the subcommand too, as kubectl takes its global flags.
    let before = std::process::Command::new(crate::support::ocifit_binary())
        .args(["--context", &current, "release-gates", "--dry-run"])
        .env("KUBECONFIG", &file)
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(
        before.status.success(),
        "--context {current} before the subcommand: {}",
        stderr(&before)
    );
    let output = release_gates(&[], &[("KUBECONFIG", &file)], home.path());
    assert!(
        !output.status.success(),
        "the current context must be the dead one"
    );
    assert_eq!(
        output.status.code(),
        Some(i32::from(ocifit::cli::Exit::Cluster.code())),
        "an unreachable apiserver is the cluster's exit code: {}",
        stderr(&output)
    );
    let output = release_gates(
        &["--context", "nowhere"],
        &[("KUBECONFIG", &file)],
        home.path(),
    );
    assert!(
        stderr(&output).contains("context nowhere"),
        "an unknown context is named: {}",
        stderr(&output)
    );

    // In-cluster: no kubeconfig anywhere, the service variables set. kube reads the service
    // account's files from fixed paths under /var/run/secrets, which a test cannot provide
    // without writing there, so this checks ocifit goes there (and names it), not the login.
    let port = cluster.config().cluster_url.port_u16().unwrap().to_string();
    let in_cluster = [
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", port.as_str()),
    ];
    let output = release_gates(&[], &in_cluster, home.path());
    let said = stderr(&output);
    assert!(!output.status.success());
    assert!(
        said.contains("in-cluster service account") && said.contains("default namespace"),
        "without a kubeconfig the service account is tried: {said}"
    );
}
