//! `ocifit artifact pull|push` logs in as `oras` does, against the real registry with htpasswd:
//! from the docker config `oras login` writes, from a docker credential helper it names (a
//! script standing in for `docker-credential-…`), with flags over the environment over the
//! config; a failing helper is named with the registry; `PATH:MEDIA_TYPE` types a layer; a large
//! transfer shows progress on a terminal only.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use base64::Engine as _;
use ocifit_testkit::Registry;

use super::support::tree;

const USER: &str = "alice";
const PASSWORD: &str = "from-the-keychain";

async fn registry() -> Registry {
    Registry::builder()
        .with_basic_auth(USER, PASSWORD)
        .start()
        .await
        .unwrap()
}

/// `ocifit artifact <args>` with only `env` for credentials (no `ORAS_*`, no user's docker
/// config), `stdin` on its standard input.
fn run(args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ocifit"))
        .arg("artifact")
        .args(args)
        .env_remove("ORAS_USER")
        .env_remove("ORAS_PULL_PASS")
        .env_remove("ORAS_PUSH_PASS")
        .env_remove("DOCKER_CONFIG")
        .env("HOME", "/nonexistent")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn failed(output: Output) -> String {
    assert!(!output.status.success(), "it succeeded");
    String::from_utf8(output.stderr).unwrap()
}

/// A docker config directory holding `config`.
fn docker_config(dir: &Path, config: serde_json::Value) -> PathBuf {
    let docker = dir.join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    std::fs::write(docker.join("config.json"), config.to_string()).unwrap();
    docker
}

fn auth(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

fn a_file(dir: &Path) -> PathBuf {
    let file = dir.join("a.txt");
    std::fs::write(&file, "a").unwrap();
    file
}

#[tokio::test]
async fn the_docker_config_logs_in_and_flags_then_the_environment_win_over_it() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let file = a_file(work.path());
    let config = docker_config(
        work.path(),
        serde_json::json!({"auths": {registry.addr(): {"auth": auth(USER, PASSWORD)}}}),
    );
    let config = config.to_str().unwrap();
    let target = registry.reference("w/login:v1");
    let push = ["push", "--plain-http", &target, file.to_str().unwrap()];

    ok(run(&push, &[("DOCKER_CONFIG", config)], ""));
    let out = work.path().join("out");
    let pull = ["pull", "--plain-http", "-o", out.to_str().unwrap(), &target];
    ok(run(&pull, &[("DOCKER_CONFIG", config)], ""));
    assert_eq!(tree(&out), [("a.txt".to_string(), b"a".to_vec())]);

    // The step contract's variables win over the config: a wrong password there is refused.
    let wrong_env = [
        ("DOCKER_CONFIG", config),
        ("ORAS_USER", USER),
        ("ORAS_PUSH_PASS", "wrong"),
    ];
    let refused = failed(run(&push, &wrong_env, ""));
    assert!(refused.contains("unauthorized to push"), "{refused}");
    // And the flags win over both.
    let mut with_flags = push.to_vec();
    with_flags.extend(["--username", USER, "--password-stdin"]);
    ok(run(&with_flags, &wrong_env, &format!("{PASSWORD}\n")));
    // The same config named with `--registry-config`, as oras names one.
    let named = format!("{config}/config.json");
    let mut flagged = push.to_vec();
    flagged.extend(["--registry-config", &named]);
    ok(run(&flagged, &[], ""));
}

/// Writes `docker-credential-<name>` into `bin`: a shell script that records what it was asked on
/// stdin in `asked` and answers `answer` with exit code `code` (stderr `message`).
fn helper(bin: &Path, name: &str, answer: &str, code: u8, message: &str) -> PathBuf {
    let asked = bin.join(format!("{name}.asked"));
    let script = format!(
        "#!/bin/sh\n[ \"$1\" = get ] || exit 3\ncat > '{}'\nprintf '%s' '{answer}'\nprintf '%s' '{message}' >&2\nexit {code}\n",
        asked.display()
    );
    let path = bin.join(format!("docker-credential-{name}"));
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    asked
}

fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[tokio::test]
async fn a_credential_helper_the_config_names_gives_the_credentials() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let file = a_file(work.path());
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let answer =
        serde_json::json!({"ServerURL": registry.addr(), "Username": USER, "Secret": PASSWORD});
    let asked = helper(&bin, "testkit", &answer.to_string(), 0, "");
    let path = path_with(&bin);
    let target = registry.reference("w/helper:v1");
    let push = ["push", "--plain-http", &target, file.to_str().unwrap()];

    // `credsStore` for every registry, as docker desktop writes it; `auths` holds only a marker.
    let store = docker_config(
        &work.path().join("store"),
        serde_json::json!({"auths": {registry.addr(): {}}, "credsStore": "testkit"}),
    );
    let env = [("DOCKER_CONFIG", store.to_str().unwrap()), ("PATH", &path)];
    let pushed = ok(run(&push, &env, ""));
    assert!(!pushed.contains(PASSWORD), "{pushed}");
    assert_eq!(std::fs::read_to_string(&asked).unwrap(), registry.addr());

    // `credHelpers` for this registry wins over `credsStore`; a helper that fails is named.
    helper(&bin, "broken", "", 1, "the keychain is locked");
    let per_registry = docker_config(
        &work.path().join("per-registry"),
        serde_json::json!({"credsStore": "testkit", "credHelpers": {registry.addr(): "broken"}}),
    );
    let env = [
        ("DOCKER_CONFIG", per_registry.to_str().unwrap()),
        ("PATH", &path),
    ];
    let message = failed(run(&push, &env, ""));
    assert!(
        message.contains("docker-credential-broken")
            && message.contains(registry.addr())
            && message.contains("the keychain is locked"),
        "{message}"
    );

    // A helper that is not installed is named too.
    let missing = docker_config(
        &work.path().join("missing"),
        serde_json::json!({"credsStore": "not-installed"}),
    );
    let env = [
        ("DOCKER_CONFIG", missing.to_str().unwrap()),
        ("PATH", &path),
    ];
    let message = failed(run(&push, &env, ""));
    assert!(
        message.contains("failed to run the credential helper docker-credential-not-installed for")
            && message.contains(registry.addr()),
        "{message}"
    );
}

#[tokio::test]
async fn a_media_type_after_the_path_types_its_layer_as_with_oras() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let file = a_file(work.path());
    let colon = work.path().join("b:c.txt");
    std::fs::write(&colon, "b").unwrap();
    let target = registry.reference("w/typed:v1");
    let typed = format!("{}:text/plain", file.display());
    let trailing = format!("{}:", colon.display());
    let login = format!("{PASSWORD}\n");
    let push = [
        "push",
        "--plain-http",
        "-u",
        USER,
        "--password-stdin",
        &target,
        &typed,
        &trailing,
    ];
    ok(run(&push, &[], &login));

    let manifest: serde_json::Value = serde_json::from_str(
        &registry
            .regctl(["manifest", "get", "--format", "raw-body", &target])
            .await
            .unwrap(),
    )
    .unwrap();
    let layers: Vec<(String, String)> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["annotations"]["org.opencontainers.image.title"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                l["mediaType"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        layers,
        [
            ("a.txt".to_string(), "text/plain".to_string()),
            (
                "b:c.txt".to_string(),
                "application/vnd.oci.image.layer.v1.tar".to_string()
            ),
        ]
    );

    let unparsable = format!("{}", colon.display());
    let message = failed(run(
        &["push", "--plain-http", &target, &unparsable],
        &[],
        "",
    ));
    assert!(message.contains("is not a media type"), "{message}");
}

#[tokio::test]
async fn a_large_transfer_shows_progress_on_a_terminal_and_nothing_in_a_log() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let big = work.path().join("big.bin");
    std::fs::write(&big, vec![7u8; 6 * 1024 * 1024]).unwrap();
    let target = registry.reference("w/big:v1");
    let env = [("ORAS_USER", USER), ("ORAS_PUSH_PASS", PASSWORD)];
    let push = ["push", "--plain-http", &target, big.to_str().unwrap()];

    let logged = run(&push, &env, "");
    let stderr = String::from_utf8_lossy(&logged.stderr).into_owned();
    assert!(logged.status.success(), "{stderr}");
    assert!(!stderr.contains("pushing"), "{stderr}");

    // `script` gives the command a terminal; what it shows there comes back on its stdout.
    let command = format!(
        "{} artifact push --plain-http {target} {}",
        env!("CARGO_BIN_EXE_ocifit"),
        big.display()
    );
    let shown = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("DOCKER_CONFIG")
        .env("HOME", "/nonexistent")
        .envs(env)
        .output()
        .unwrap();
    let screen = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.status.success(), "{screen}");
    assert!(
        screen.contains("pushing") && screen.contains("6.00 MiB"),
        "{screen}"
    );
}
