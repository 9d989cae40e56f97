//! A step's three helpers as its pod runs them, without a kubelet: `prepare` (pulls the inputs,
//! installs the launcher), the step's command under the installed launcher (`ld.so --library-path
//! … ocifit artifact launch`), and `deliver` (the pushing sidecar), against a real registry; what
//! was pushed is read back with the ORAS Python SDK.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::support::{ocifit, sdk_pull, sdk_push, tree};
use ocifit::step_helper::{Direction, Report};
use ocifit_testkit::Registry;

/// A pod's worth of directories: the inputs volume, the run volume, the step's working directory.
struct Pod {
    dir: tempfile::TempDir,
}

impl Pod {
    fn new() -> Self {
        let pod = Pod {
            dir: tempfile::tempdir().unwrap(),
        };
        for sub in ["inputs", "run", "work"] {
            std::fs::create_dir(pod.path(sub)).unwrap();
        }
        pod
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    fn prepare(&self, registry: &Registry, inputs: &[&str]) -> Output {
        let into = self.path("inputs");
        let launcher = self.path("run/bin");
        let log = self.path("prepare.log");
        let mut args = vec!["prepare", "--plain-http", "--into", into.to_str().unwrap()];
        let references: Vec<String> = inputs.iter().map(|i| registry.reference(i)).collect();
        for reference in &references {
            args.extend(["--input", reference.as_str()]);
        }
        args.extend([
            "--launcher",
            launcher.to_str().unwrap(),
            "--termination-log",
            log.to_str().unwrap(),
        ]);
        ocifit(&args, &[])
    }

    /// [`Pod::prepare`], which must succeed.
    fn prepared(&self, registry: &Registry, inputs: &[&str]) {
        let prepared = self.prepare(registry, inputs);
        assert!(
            prepared.status.success(),
            "{}",
            String::from_utf8_lossy(&prepared.stderr)
        );
    }

    /// What `reference` holds, pulled with the ORAS SDK into `pulled/`.
    fn pull(&self, registry: &Registry, reference: &str) -> PathBuf {
        let out = self.path("pulled");
        std::fs::create_dir(&out).unwrap();
        sdk_pull(registry, &registry.reference(reference), &out);
        out
    }

    fn deliver(&self, registry: &Registry, to: &str) -> Child {
        Command::new(env!("CARGO_BIN_EXE_ocifit"))
            .args(["artifact", "deliver", "--plain-http", "--run"])
            .arg(self.path("run"))
            .args(["--to", &registry.reference(to)])
            .arg("--termination-log")
            .arg(self.path("deliver.log"))
            .env_remove("ORAS_USER")
            .env_remove("ORAS_PUSH_PASS")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The step's container: the installed launcher, nothing of this machine's ocifit.
    fn launch(&self, extra: &[&str], command: &[&str]) -> Command {
        let bin = self.path("run/bin");
        let mut launch = Command::new(bin.join("ld.so"));
        launch
            .arg("--library-path")
            .arg(&bin)
            .arg(bin.join("ocifit"))
            .args(["artifact", "launch", "--run"])
            .arg(self.path("run"))
            .arg("--termination-log")
            .arg(self.path("termination.log"))
            .args(extra)
            .arg("--")
            .args(command)
            .current_dir(self.path("work"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        launch
    }

    /// A helper's report, from the termination message it wrote to `log`.
    fn report(&self, log: &str) -> Report {
        let message = std::fs::read_to_string(self.path(log)).unwrap_or_default();
        Report::read(&message).unwrap_or_else(|| panic!("no report in {log}: {message:?}"))
    }

    fn termination_message(&self) -> String {
        std::fs::read_to_string(self.path("termination.log")).unwrap_or_default()
    }
}

fn stop(mut deliver: Child) -> Output {
    let pid = deliver.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while deliver.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "deliver ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    deliver.wait_with_output().unwrap()
}

/// Pushes `content` as the file `path` (`name` or `dir/name`) with the ORAS SDK: a step's output.
fn pushed(registry: &Registry, reference: &str, path: &str, content: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, content).unwrap();
    let top = path.split('/').next().unwrap_or(path);
    sdk_push(registry, &registry.reference(reference), dir.path(), &[top]);
}

#[tokio::test]
async fn a_step_reads_its_inputs_and_its_outputs_and_piped_output_are_pushed() {
    let registry = Registry::builder().start().await.unwrap();
    pushed(&registry, "w/one:v1", "numbers.txt", "3\n4\n");
    pushed(&registry, "w/two:v1", "factor.txt", "10\n");
    let pod = Pod::new();
    pod.prepared(&registry, &["w/one:v1", "w/two:v1"]);
    assert_eq!(tree(&pod.path("inputs")).len(), 2);
    let pulled = pod.report("prepare.log");
    assert_eq!(
        (pulled.direction, pulled.ok, pulled.files, pulled.bytes),
        (Direction::Pull, true, 2, 7),
        "both inputs' files: 4 and 3 bytes"
    );

    let deliver = pod.deliver(&registry, "w/result:v1");
    let inputs = pod.path("inputs");
    let script = format!(
        "mkdir -p results && cat {0}/numbers.txt {0}/factor.txt > results/all.txt && echo summed",
        inputs.display()
    );
    let status = pod
        .launch(
            &["--push", "results", "--pipe", "results/stdout.txt"],
            &["/bin/sh", "-c", &script],
        )
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", pod.termination_message());
    stop(deliver);
    let pushed = pod.report("deliver.log");
    assert_eq!(
        (pushed.direction, pushed.ok, pushed.files),
        (Direction::Push, true, 1)
    );
    assert!(pushed.bytes > 0, "{pushed:?}");

    let out = pod.pull(&registry, "w/result:v1");
    assert_eq!(
        tree(&out.join("results")),
        [
            ("all.txt".to_string(), b"3\n4\n10\n".to_vec()),
            ("stdout.txt".to_string(), b"summed\n".to_vec())
        ]
    );
}

#[tokio::test]
async fn scattered_outputs_are_gathered_into_one_inputs_out_beside_the_images_files_and_pushed_whole()
 {
    let registry = Registry::builder().start().await.unwrap();
    pushed(&registry, "w/scatter-1:v1", "out/a.txt", "a\n");
    pushed(&registry, "w/scatter-2:v1", "out/b.txt", "b\n");
    let pod = Pod::new();
    std::fs::write(pod.path("work/image.txt"), "the image's\n").unwrap();
    pod.prepared(&registry, &["w/scatter-1:v1", "w/scatter-2:v1"]);

    // The oras-operator's fan-in: no input-path (the inputs at inputs/ in the working directory,
    // as its `cp -R` puts them), no output-path (the working directory pushed).
    let deliver = pod.deliver(&registry, "w/gathered:v1");
    let inputs = pod.path("inputs");
    let status = pod
        .launch(
            &["--inputs", inputs.to_str().unwrap(), "--push", "."],
            &[
                "/bin/sh",
                "-c",
                "ls inputs/out > listing.txt && cat image.txt >> listing.txt",
            ],
        )
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", pod.termination_message());
    stop(deliver);

    let out = pod.pull(&registry, "w/gathered:v1");
    assert_eq!(
        tree(&out),
        [
            ("image.txt".to_string(), b"the image's\n".to_vec()),
            ("inputs/out/a.txt".to_string(), b"a\n".to_vec()),
            ("inputs/out/b.txt".to_string(), b"b\n".to_vec()),
            (
                "listing.txt".to_string(),
                b"a.txt\nb.txt\nthe image's\n".to_vec()
            ),
        ]
    );
}

#[tokio::test]
async fn a_file_in_two_inputs_stops_the_step_naming_it_and_both_inputs() {
    let registry = Registry::builder().start().await.unwrap();
    pushed(&registry, "w/first:v1", "out/same.txt", "1");
    pushed(&registry, "w/second:v1", "out/same.txt", "2");
    let pod = Pod::new();
    let prepared = pod.prepare(&registry, &["w/first:v1", "w/second:v1"]);
    assert!(!prepared.status.success());
    let reason = std::fs::read_to_string(pod.path("prepare.log")).unwrap();
    let expected = format!(
        "out/same.txt is in both input {} and input {}",
        registry.reference("w/first:v1"),
        registry.reference("w/second:v1")
    );
    assert!(reason.contains(&expected), "{reason}");
}

#[tokio::test]
async fn a_failed_step_pushes_nothing_and_keeps_its_exit_status() {
    let registry = Registry::builder().start().await.unwrap();
    let pod = Pod::new();
    pod.prepared(&registry, &[]);
    let deliver = pod.deliver(&registry, "w/never:v1");
    let status = pod
        .launch(
            &["--push", "partial.txt"],
            &["/bin/sh", "-c", "echo half > partial.txt; exit 4"],
        )
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(4));
    stop(deliver);
    let missing = registry
        .crane(["manifest", &registry.reference("w/never:v1")])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("MANIFEST_UNKNOWN") || missing.contains("NAME_UNKNOWN"),
        "{missing}"
    );
}

#[tokio::test]
async fn a_missing_input_stops_the_step_before_it_starts_with_the_reason() {
    let registry = Registry::builder().start().await.unwrap();
    let pod = Pod::new();
    let prepared = pod.prepare(&registry, &["w/absent:v1"]);
    assert!(!prepared.status.success());
    let report = pod.report("prepare.log");
    assert!(!report.ok);
    let reason = report.error.unwrap_or_default();
    assert!(
        reason.contains(&registry.reference("w/absent:v1")),
        "{reason}"
    );
    assert!(reason.contains("not found"), "{reason}");
}

#[tokio::test]
async fn a_push_the_registry_refuses_fails_the_step_with_the_reason() {
    let registry = Registry::builder()
        .with_basic_auth("steps", "secret")
        .start()
        .await
        .unwrap();
    let pod = Pod::new();
    pod.prepared(&registry, &[]);
    let deliver = pod.deliver(&registry, "w/refused:v1");
    let status = pod
        .launch(
            &["--push", "out.txt"],
            &["/bin/sh", "-c", "echo x > out.txt"],
        )
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(75));
    let message = pod.termination_message();
    assert!(
        message.contains("the step succeeded but its outputs were not pushed"),
        "{message}"
    );
    assert!(message.contains("unauthorized"), "{message}");
    stop(deliver);
    let report = pod.report("deliver.log");
    assert!(!report.ok);
    assert!(report.error.unwrap_or_default().contains("unauthorized"));
}

#[tokio::test]
async fn sigterm_reaches_the_steps_command() {
    let registry = Registry::builder().start().await.unwrap();
    let pod = Pod::new();
    pod.prepared(&registry, &[]);
    let mut step = pod
        .launch(
            &[],
            &[
                "/bin/sh",
                "-c",
                "trap 'exit 42' TERM; while true; do sleep 0.1; done",
            ],
        )
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    Command::new("kill")
        .args(["-TERM", &step.id().to_string()])
        .status()
        .unwrap();
    let started = Instant::now();
    let status = step.wait().unwrap();
    assert_eq!(status.code(), Some(42));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn the_installed_launcher_needs_nothing_outside_its_directory() {
    let pod = Pod::new();
    let into = pod.path("inputs");
    let launcher = pod.path("run/bin");
    let prepared = ocifit(
        &[
            "prepare",
            "--into",
            into.to_str().unwrap(),
            "--launcher",
            launcher.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        prepared.status.success(),
        "{}",
        String::from_utf8_lossy(&prepared.stderr)
    );
    let listed = Command::new(launcher.join("ld.so"))
        .arg("--list")
        .arg("--library-path")
        .arg(&launcher)
        .arg(launcher.join("ocifit"))
        .env_clear()
        .output()
        .unwrap();
    let text = String::from_utf8(listed.stdout).unwrap();
    let resolved: Vec<&str> = text.lines().filter(|l| l.contains("=>")).collect();
    assert!(!resolved.is_empty(), "{text}");
    for line in resolved {
        assert!(line.contains(launcher.to_str().unwrap()), "{line}");
    }
    assert!(is_executable(&launcher.join("ocifit")));
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o111 != 0
}
