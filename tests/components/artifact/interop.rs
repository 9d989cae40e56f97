//! `ocifit artifact pull|push` and the ORAS Python SDK move the same artifacts both ways through a
//! real registry: files by their names, several files, directories unpacked; with the registry's
//! basic auth from the step contract's environment; and a pull refuses what would write outside
//! its directory or does not match its digest, leaving nothing behind.

use std::path::Path;

use super::support::{
    make_tree, ocifit, ocifit_ok, sdk_edit_layer_annotation, sdk_pull, sdk_push, sdk_push_titled,
    tree,
};
use ocifit_testkit::Registry;

async fn registry() -> Registry {
    Registry::builder().start().await.unwrap()
}

/// `ocifit artifact pull --plain-http [extra] -o out REF`, successful or not.
fn pull(registry: &Registry, reference: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let target = registry.reference(reference);
    let mut args = vec!["pull", "--plain-http"];
    args.extend(extra);
    args.extend(["-o", out.to_str().unwrap(), target.as_str()]);
    ocifit(&args, &[])
}

fn pull_into(registry: &Registry, reference: &str, out: &Path) -> String {
    let output = pull(registry, reference, out, &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn push_from(registry: &Registry, reference: &str, paths: &[&Path]) -> String {
    let target = registry.reference(reference);
    let mut args = vec!["push", "--plain-http", target.as_str()];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    ocifit_ok(&args, &[])
}

#[tokio::test]
async fn a_file_pushed_with_the_sdk_is_pulled_by_ocifit_under_its_name() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("pancakes.txt"), "blueberry\n").unwrap();
    let digest = sdk_push(
        &registry,
        &registry.reference("w/one:v1"),
        work.path(),
        &["pancakes.txt"],
    );

    let out = work.path().join("out");
    let printed = pull_into(&registry, "w/one:v1", &out);
    assert!(printed.contains(&digest), "{printed}");
    assert_eq!(
        tree(&out),
        [("pancakes.txt".to_string(), b"blueberry\n".to_vec())]
    );
}

#[tokio::test]
async fn several_files_pushed_with_the_sdk_are_all_pulled() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    for (name, content) in [("a.txt", "alpha"), ("b.csv", "1,2\n"), ("c.bin", "\0\x01")] {
        std::fs::write(work.path().join(name), content).unwrap();
    }
    sdk_push(
        &registry,
        &registry.reference("w/many:v1"),
        work.path(),
        &["a.txt", "b.csv", "c.bin"],
    );
    let out = work.path().join("out");
    pull_into(&registry, "w/many:v1", &out);
    let names: Vec<String> = tree(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a.txt", "b.csv", "c.bin"]);
}

#[tokio::test]
async fn a_directory_pushed_with_the_sdk_is_unpacked_by_ocifit() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let files: [(&str, &[u8]); 3] = [
        ("top.txt", b"top"),
        ("deep/er/leaf.txt", b"leaf"),
        ("deep/big.bin", &[42u8; 300_000]),
    ];
    make_tree(work.path(), "results", &files);
    sdk_push(
        &registry,
        &registry.reference("w/dir:v1"),
        work.path(),
        &["results"],
    );

    let out = work.path().join("out");
    let printed = pull_into(&registry, "w/dir:v1", &out);
    assert!(printed.contains("results/"), "{printed}");
    assert_eq!(
        tree(&out.join("results")),
        tree(&work.path().join("results"))
    );
}

#[tokio::test]
async fn files_and_a_directory_pushed_by_ocifit_are_pulled_by_the_sdk() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let dir = make_tree(
        work.path(),
        "results",
        &[
            ("a.txt", b"a"),
            ("sub/b.txt", b"b"),
            ("sub/c/d.bin", &[7u8; 100_000]),
        ],
    );
    let file = work.path().join("summary.json");
    std::fs::write(&file, "{\"ok\":true}").unwrap();
    let printed = push_from(&registry, "w/out:v1", &[&dir, &file]);
    assert!(
        printed.starts_with(&format!("pushed {}", registry.reference("w/out:v1"))),
        "{printed}"
    );

    let out = work.path().join("sdk");
    std::fs::create_dir(&out).unwrap();
    let written = sdk_pull(&registry, &registry.reference("w/out:v1"), &out);
    assert_eq!(written.len(), 2, "{written:?}");
    assert_eq!(tree(&out.join("results")), tree(&dir));
    assert_eq!(
        std::fs::read(out.join("summary.json")).unwrap(),
        b"{\"ok\":true}"
    );
}

#[tokio::test]
async fn ocifit_writes_the_layout_oras_push_writes() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let dir = make_tree(work.path(), "results", &[("a.txt", b"a")]);
    let file = work.path().join("log.txt");
    std::fs::write(&file, "log").unwrap();
    push_from(&registry, "w/layout:v1", &[&dir, &file]);

    let manifest: serde_json::Value = serde_json::from_str(
        &registry
            .crane(["manifest", &registry.reference("w/layout:v1")])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["artifactType"],
        "application/vnd.unknown.artifact.v1"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.empty.v1+json"
    );
    assert!(manifest["annotations"]["org.opencontainers.image.created"].is_string());
    let directory = &manifest["layers"][0];
    assert_eq!(
        directory["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    assert_eq!(
        directory["annotations"]["org.opencontainers.image.title"],
        "results"
    );
    assert_eq!(
        directory["annotations"]["io.deis.oras.content.unpack"],
        "true"
    );
    assert!(
        directory["annotations"]["io.deis.oras.content.digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let plain = &manifest["layers"][1];
    assert_eq!(plain["mediaType"], "application/vnd.oci.image.layer.v1.tar");
    assert_eq!(
        plain["annotations"]["org.opencontainers.image.title"],
        "log.txt"
    );
}

#[tokio::test]
async fn a_directory_kept_packed_travels_as_its_tar_gz() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let dir = make_tree(work.path(), "results", &[("a.txt", b"a")]);
    let target = registry.reference("w/packed:v1");
    ocifit_ok(
        &[
            "push",
            "--plain-http",
            "--no-unpack",
            &target,
            dir.to_str().unwrap(),
        ],
        &[],
    );
    let out = work.path().join("out");
    pull_into(&registry, "w/packed:v1", &out);
    let names: Vec<String> = tree(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["results.tar.gz"]);
    // Pulling a directory layer without unpacking keeps it as its archive too.
    push_from(&registry, "w/unpacked:v1", &[&dir]);
    let kept = work.path().join("kept");
    let output = pull(&registry, "w/unpacked:v1", &kept, &["--no-unpack"]);
    assert!(output.status.success());
    let names: Vec<String> = tree(&kept).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["results.tar.gz"]);
}

#[tokio::test]
async fn credentials_come_from_the_step_contracts_environment_and_are_never_printed() {
    let registry = Registry::builder()
        .with_basic_auth("steps", "pa55-w0rd")
        .start()
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("a.txt");
    std::fs::write(&file, "a").unwrap();
    let target = registry.reference("w/auth:v1");
    let push = [
        "push",
        "--plain-http",
        target.as_str(),
        file.to_str().unwrap(),
    ];

    let anonymous = ocifit(&push, &[]);
    assert!(!anonymous.status.success());
    let message = String::from_utf8_lossy(&anonymous.stderr);
    assert!(message.contains("unauthorized"), "{message}");

    // The pull password does not push.
    let wrong = ocifit(
        &push,
        &[("ORAS_USER", "steps"), ("ORAS_PULL_PASS", "pa55-w0rd")],
    );
    assert!(!wrong.status.success());

    ocifit_ok(
        &push,
        &[("ORAS_USER", "steps"), ("ORAS_PUSH_PASS", "pa55-w0rd")],
    );
    let out = work.path().join("out");
    let pulled = ocifit(
        &["pull", "--plain-http", "-o", out.to_str().unwrap(), &target],
        &[("ORAS_USER", "steps"), ("ORAS_PULL_PASS", "pa55-w0rd")],
    );
    assert!(
        pulled.status.success(),
        "{}",
        String::from_utf8_lossy(&pulled.stderr)
    );
    for output in [&anonymous, &wrong, &pulled] {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !all.contains("pa55-w0rd"),
            "the password was printed: {all}"
        );
    }
    assert_eq!(tree(&out), [("a.txt".to_string(), b"a".to_vec())]);
}

#[tokio::test]
async fn a_layer_titled_outside_the_directory_is_refused_and_nothing_is_written() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("payload");
    std::fs::write(&file, "owned").unwrap();
    sdk_push_titled(
        &registry,
        &registry.reference("w/evil:v1"),
        &file,
        "../escape.txt",
    );

    let out = work.path().join("out");
    let refused = pull(&registry, "w/evil:v1", &out, &[]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("\"../escape.txt\"") && message.contains("climbs out"),
        "{message}"
    );
    assert!(!work.path().join("escape.txt").exists());
    assert!(!out.exists(), "refused before anything was written");
}

#[tokio::test]
async fn a_blob_that_does_not_match_its_digest_leaves_nothing_behind() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("data.txt"), "the real content").unwrap();
    sdk_push(
        &registry,
        &registry.reference("w/bad:v1"),
        work.path(),
        &["data.txt"],
    );
    // Corrupt the blob in the registry's storage, keeping its size.
    let blobs = registry
        .dir()
        .join("storage/docker/registry/v2/blobs/sha256");
    let digest = ocifit::registry::sha256_digest(b"the real content").replacen("sha256:", "", 1);
    let data = blobs.join(&digest[..2]).join(&digest).join("data");
    std::fs::write(&data, "THE FAKE CONTENT").unwrap();

    let out = work.path().join("out");
    let refused = pull(&registry, "w/bad:v1", &out, &[]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("digest mismatch"), "{message}");
    assert!(tree(&out).is_empty(), "{:?}", tree(&out));
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "no staging file is left"
    );
}

#[tokio::test]
async fn a_pull_never_replaces_what_is_already_there() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "new").unwrap();
    sdk_push(
        &registry,
        &registry.reference("w/a:v1"),
        work.path(),
        &["a.txt"],
    );
    let out = work.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("a.txt"), "mine").unwrap();
    let refused = pull(&registry, "w/a:v1", &out, &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("already exists"));
    assert_eq!(std::fs::read_to_string(out.join("a.txt")).unwrap(), "mine");
}

#[tokio::test]
async fn a_directory_pushed_by_ocifit_is_pulled_by_ocifit_and_its_archive_digest_checked() {
    let registry = registry().await;
    let work = tempfile::tempdir().unwrap();
    let dir = make_tree(
        work.path(),
        "results",
        &[("a.txt", b"a"), ("sub/b.bin", &[3u8; 200_000])],
    );
    push_from(&registry, "w/round:v1", &[&dir]);
    let out = work.path().join("out");
    pull_into(&registry, "w/round:v1", &out);
    assert_eq!(tree(&out.join("results")), tree(&dir));

    // The same blob, but the manifest claims another uncompressed digest: refused, nothing kept.
    sdk_edit_layer_annotation(
        &registry,
        &registry.reference("w/round:v1"),
        &registry.reference("w/round:lying"),
        "io.deis.oras.content.digest",
        &format!("sha256:{}", "0".repeat(64)),
    );
    let lying = work.path().join("lying");
    let refused = pull(&registry, "w/round:lying", &lying, &[]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("uncompressed archive's digest"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_dir(&lying).unwrap().count(),
        0,
        "nothing is left"
    );
}
