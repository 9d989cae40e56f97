//! The pushing sidecar (`ocifit artifact deliver`) against a step's code, which can write the run
//! volume it shares with it: a forged request naming another directory, a request whose id climbs
//! out, staged outputs that are, or hold, a symbolic link to the sidecar's own
//! `/proc/self/environ`. The sidecar holds the push credentials in its environment; whatever the
//! step writes, nothing it pushes carries them, and it writes nowhere but its run volume. Every
//! helper is non-dumpable from its start, before it reads its credentials: its environment cannot
//! be read by another process of its user.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::support::sdk_pull;
use ocifit_testkit::Registry;

/// The push password: in the sidecar's environment and nowhere else.
const SECRET: &str = "s3cret-never-pushed-0d1f";
const USER: &str = "steps";
const WAIT: Duration = Duration::from_secs(60);

struct Sidecar {
    dir: tempfile::TempDir,
    child: Child,
}

impl Sidecar {
    /// `deliver` with the push credentials, pushing to `to`, its log in `deliver.log`.
    fn start(registry: &Registry, to: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("run")).unwrap();
        let log = std::fs::File::create(dir.path().join("deliver.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ocifit"))
            .args(["artifact", "deliver", "--plain-http", "--run"])
            .arg(dir.path().join("run"))
            .args(["--to", &registry.reference(to)])
            .env("ORAS_USER", USER)
            .env("ORAS_PUSH_PASS", SECRET)
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        Sidecar { dir, child }
    }

    fn run(&self, sub: &str) -> PathBuf {
        self.dir.path().join("run").join(sub)
    }

    /// What the step's code writes as `request`, whole, as the launcher would.
    fn forge(&self, json: &str) {
        let partial = self.run(".forged");
        std::fs::write(&partial, json).unwrap();
        std::fs::rename(&partial, self.run("request")).unwrap();
    }

    /// Waits for `result-<id>`; its JSON.
    fn answer(&self, id: &str) -> serde_json::Value {
        let file = self.run(&format!("result-{id}"));
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(bytes) = std::fs::read(&file) {
                return serde_json::from_slice(&bytes).unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "no answer to request {id}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("deliver.log")).unwrap_or_default()
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn link_to_environ(at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/proc/self/environ", at).unwrap();
}

/// Every regular file under `root` (links are not followed), with its content.
fn regular_files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let content = std::fs::read(&path).unwrap();
                found.push((path, content));
            }
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

async fn is_tagged(registry: &Registry, reference: &str) -> bool {
    registry
        .crane(["manifest", &registry.reference(reference)])
        .await
        .is_ok()
}

#[tokio::test]
async fn a_forged_request_naming_another_directory_pushes_nothing() {
    let registry = Registry::builder()
        .with_basic_auth(USER, SECRET)
        .start()
        .await
        .unwrap();
    let sidecar = Sidecar::start(&registry, "w/forged:v1");
    // The step's code plants a link to the sidecar's environment and names its directory.
    link_to_environ(&sidecar.run("planted/environ"));
    sidecar.forge(r#"{"id":"forged","outputs":"planted"}"#);
    let answer = sidecar.answer("forged");
    assert!(
        answer.get("failed").is_some(),
        "the forged directory was pushed: {answer}"
    );
    assert!(
        !is_tagged(&registry, "w/forged:v1").await,
        "something was pushed for a forged request"
    );
}

#[tokio::test]
async fn staged_outputs_that_are_a_link_are_refused_and_links_inside_stay_links() {
    let registry = Registry::builder()
        .with_basic_auth(USER, SECRET)
        .start()
        .await
        .unwrap();
    let sidecar = Sidecar::start(&registry, "w/links:v1");

    // The one staged entry is a link to the sidecar's environment.
    link_to_environ(&sidecar.run("outputs-top/environ"));
    sidecar.forge(r#"{"id":"top","outputs":"outputs-top"}"#);
    let answer = sidecar.answer("top");
    let message = answer["failed"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("symbolic link"),
        "a link at the top was not refused: {answer}"
    );
    assert!(!is_tagged(&registry, "w/links:v1").await);

    // The staged directory itself is a link to the sidecar's /proc/self.
    std::os::unix::fs::symlink("/proc/self", sidecar.run("outputs-whole")).unwrap();
    sidecar.forge(r#"{"id":"whole","outputs":"outputs-whole"}"#);
    let answer = sidecar.answer("whole");
    let message = answer["failed"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("symbolic link"),
        "a linked outputs directory was not refused: {answer}"
    );
    assert!(!is_tagged(&registry, "w/links:v1").await);

    // A directory holding a link to the environment: pushed, the link as a link.
    std::fs::create_dir_all(sidecar.run("outputs-inside/out")).unwrap();
    std::fs::write(sidecar.run("outputs-inside/out/real.txt"), "real\n").unwrap();
    link_to_environ(&sidecar.run("outputs-inside/out/environ"));
    sidecar.forge(r#"{"id":"inside","outputs":"outputs-inside"}"#);
    let answer = sidecar.answer("inside");
    assert!(answer.get("pushed").is_some(), "{answer}");
    let pulled = tempfile::tempdir().unwrap();
    sdk_pull(&registry, &registry.reference("w/links:v1"), pulled.path());
    assert_eq!(
        std::fs::read_link(pulled.path().join("out/environ")).unwrap(),
        Path::new("/proc/self/environ")
    );
    let files = regular_files(pulled.path());
    assert_eq!(files.len(), 1, "{files:?}");
    for (path, content) in files {
        assert!(
            !contains(&content, SECRET) && !contains(&content, "ORAS_PUSH_PASS"),
            "{} holds the sidecar's environment",
            path.display()
        );
    }
}

#[tokio::test]
async fn a_request_whose_id_climbs_out_is_not_served() {
    let registry = Registry::builder()
        .with_basic_auth(USER, SECRET)
        .start()
        .await
        .unwrap();
    let sidecar = Sidecar::start(&registry, "w/climb:v1");
    // `result-<id>` (and its temporary `.result-<id>.partial`) would resolve to the directory
    // above the run volume.
    std::fs::create_dir_all(sidecar.run("result-x")).unwrap();
    std::fs::create_dir_all(sidecar.run(".result-x")).unwrap();
    std::fs::create_dir_all(sidecar.run("planted")).unwrap();
    std::fs::write(sidecar.run("planted/a.txt"), "a").unwrap();
    sidecar.forge(r#"{"id":"x/../../escaped","outputs":"planted"}"#);
    let escaped = sidecar.dir.path().join("escaped");
    let deadline = Instant::now() + WAIT;
    while !sidecar.log().contains("not served") && !escaped.exists() {
        assert!(Instant::now() < deadline, "{}", sidecar.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !escaped.exists(),
        "the sidecar wrote outside its run volume"
    );
    assert!(
        sidecar.log().contains("is not 1 to 64 letters"),
        "{}",
        sidecar.log()
    );
    assert!(!is_tagged(&registry, "w/climb:v1").await);
}

/// The uid both the sidecar and the step run as in this test, as helpers do when the step names
/// its user.
const SHARED_UID: &str = "4242";

fn as_shared_user() -> Command {
    let mut command = Command::new("setpriv");
    command.args([
        "--reuid",
        SHARED_UID,
        "--regid",
        SHARED_UID,
        "--clear-groups",
    ]);
    command
}

/// A process killed when the test ends, failed or not.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_sidecars_environment_is_unreadable_to_a_process_of_the_same_user() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let registry = Registry::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
    // A step in a pod with shareProcessNamespace sees the sidecar's process.
    let sidecar = as_shared_user()
        .arg(env!("CARGO_BIN_EXE_ocifit"))
        .args(["artifact", "deliver", "--plain-http", "--run"])
        .arg(&run)
        .args(["--to", &registry.reference("w/any:v1")])
        .env("ORAS_USER", USER)
        .env("ORAS_PUSH_PASS", SECRET)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sidecar = Stopped(sidecar);
    let process = PathBuf::from(format!("/proc/{}", sidecar.0.id()));
    let environ = process.join("environ");
    let binary = std::fs::canonicalize(env!("CARGO_BIN_EXE_ocifit")).unwrap();
    // Once it runs ocifit (setpriv, before it, runs as root), its /proc files are its user's
    // while it is dumpable and root's once it is not.
    let deadline = Instant::now() + WAIT;
    let non_dumpable = || {
        std::fs::read_link(process.join("exe")).is_ok_and(|exe| exe == binary)
            && std::fs::metadata(&environ).is_ok_and(|m| m.uid() == 0)
    };
    while !non_dumpable() {
        assert!(
            Instant::now() < deadline,
            "the sidecar's environment stays its user's"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = as_shared_user().arg("cat").arg(&environ).output().unwrap();
    drop(sidecar);
    assert!(
        !read.status.success(),
        "the same user read the sidecar's environment"
    );
    assert!(!contains(&read.stdout, SECRET));
}

#[tokio::test]
async fn a_helper_is_non_dumpable_from_its_start_before_it_reaches_the_registry() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // A registry that accepts and never answers: the pull waits there, its credentials read.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = silent.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let pull = as_shared_user()
        .arg(env!("CARGO_BIN_EXE_ocifit"))
        .args(["artifact", "pull", "--plain-http", "-o"])
        .arg(dir.path().join("out"))
        .arg(format!("{address}/w/any:v1"))
        .env("ORAS_USER", USER)
        .env("ORAS_PULL_PASS", SECRET)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pull = Stopped(pull);
    let (_connection, _) = silent.accept().unwrap();
    // It has read its credentials and connected: no ocifit code ran before it was non-dumpable.
    let environ = PathBuf::from(format!("/proc/{}/environ", pull.0.id()));
    assert_eq!(
        std::fs::metadata(&environ).unwrap().uid(),
        0,
        "the pulling helper's environment is its user's"
    );
    let read = as_shared_user().arg("cat").arg(&environ).output().unwrap();
    drop(pull);
    assert!(!read.status.success() && !contains(&read.stdout, SECRET));
}
