//! `docs/cli.md` and the binary agree: its exit-code table is `ocifit::cli::Exit`, row for row;
//! the same failure exits with the same code whichever subcommand met it (an apiserver nothing
//! listens for, an unknown context, a registry nothing listens for, a usage error); and the
//! binary run as kubectl's plugin (`kubectl-ocifit`) names itself `kubectl ocifit`.

use std::path::Path;
use std::process::{Command, Output};

use ocifit::cli::Exit;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The rows of the exit-code table: `| 0 | `ok` | meaning |` → (0, "ok").
fn rows_in_docs() -> Vec<(u8, String)> {
    let docs = std::fs::read_to_string(Path::new(REPO).join("docs/cli.md")).expect("docs/cli.md");
    let table = docs
        .split("## Exit codes")
        .nth(1)
        .expect("an Exit codes section");
    table
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let code = cells.get(1)?.parse().ok()?;
            Some((code, cells.get(2)?.trim_matches('`').to_owned()))
        })
        .collect()
}

#[test]
fn the_exit_code_table_in_docs_is_the_one_the_binary_uses() {
    let code: Vec<(u8, String)> = Exit::ALL
        .iter()
        .map(|exit| (exit.code(), exit.name().to_owned()))
        .collect();
    assert_eq!(
        rows_in_docs(),
        code,
        "docs/cli.md's exit codes and cli::Exit differ"
    );
}

/// `ocifit ARGS` with only `kubeconfig` saying where the cluster is.
fn ocifit(args: &[&str], kubeconfig: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ocifit"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", kubeconfig.parent().expect("a directory"))
        .current_dir(REPO)
        .output()
        .expect("the ocifit binary runs")
}

/// A kubeconfig whose one cluster is a loopback port nothing listens on.
fn unreachable_kubeconfig(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("config");
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}],
    });
    std::fs::write(&path, config.to_string()).expect("the kubeconfig");
    path
}

fn assert_code(output: &Output, exit: Exit, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(i32::from(exit.code())),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

const CLUSTER_COMMANDS: [&[&str]; 6] = [
    &["release-gates"],
    &["release-gates", "--dry-run"],
    &["placement", "untaint"],
    &["placement", "audit"],
    &["explain", "pod", "web", "-n", "shop"],
    &["selftest", "-n", "ocifit-test"],
];

#[test]
fn an_unreachable_apiserver_exits_with_the_cluster_code_in_every_subcommand() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let kubeconfig = unreachable_kubeconfig(dir.path());
    for command in CLUSTER_COMMANDS {
        assert_code(
            &ocifit(command, &kubeconfig),
            Exit::Cluster,
            &command.join(" "),
        );
    }
}

#[test]
fn an_unknown_context_exits_with_the_cluster_code_in_every_subcommand() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let kubeconfig = unreachable_kubeconfig(dir.path());
    for command in CLUSTER_COMMANDS {
        let mut args = vec!["--context", "nowhere"];
        args.extend_from_slice(command);
        let output = ocifit(&args, &kubeconfig);
        assert_code(&output, Exit::Cluster, &args.join(" "));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("context nowhere"),
            "{args:?}: {output:?}"
        );
    }
}

#[test]
fn an_unreachable_registry_exits_with_the_registry_code_in_resolve_and_artifact_pull() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let reference = "127.0.0.1:1/acme/compat:v1";
    let nodes = "example/flavor-nodes.json";
    let resolve = ocifit(
        &[
            "resolve",
            "--plain-http",
            "--artifact",
            reference,
            "--nodes",
            nodes,
        ],
        &kubeconfig,
    );
    assert_code(&resolve, Exit::Registry, "resolve");
    let into = dir.path().join("pulled");
    let into = into.to_str().expect("a UTF-8 path");
    let pull = ocifit(
        &["artifact", "pull", "--plain-http", "-o", into, reference],
        &kubeconfig,
    );
    assert_code(&pull, Exit::Registry, "artifact pull");
}

#[test]
fn a_usage_error_exits_with_the_usage_code_in_every_subcommand() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let kubeconfig = unreachable_kubeconfig(dir.path());
    for command in [
        &["release-gates", "--no-such-flag"][..],
        &["explain", "pod"],
        &["resolve", "--no-such-flag"],
        &["crd", "nothing.ocifit.io"],
        &["selftest"],
    ] {
        assert_code(
            &ocifit(command, &kubeconfig),
            Exit::Usage,
            &command.join(" "),
        );
    }
}

#[test]
fn run_as_kubectl_ocifit_its_usage_says_kubectl_ocifit() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let plugin = dir.path().join("kubectl-ocifit");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ocifit"), &plugin).expect("the plugin link");
    let output = Command::new(&plugin)
        .args(["explain", "pod", "--help"])
        .output()
        .expect("the plugin runs");
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("Usage: kubectl ocifit explain pod"), "{help}");
    let wrong = Command::new(&plugin)
        .arg("--no-such-flag")
        .output()
        .expect("the plugin runs");
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("kubectl ocifit"),
        "{wrong:?}"
    );
}
