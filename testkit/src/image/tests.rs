use std::io::Read;

use super::*;

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").unwrap();
    std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap()
}

/// The layer's entries: path, type, mode, uid, and content for files and symlinks.
fn entries(layer: &[u8]) -> Vec<(String, tar::EntryType, u32, u64, String)> {
    let mut archive = tar::Archive::new(layer);
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let header = entry.header().clone();
            let mut content = String::new();
            if header.entry_type() == tar::EntryType::Symlink {
                content = entry.link_name().unwrap().unwrap().display().to_string();
            } else {
                entry.read_to_string(&mut content).unwrap();
            }
            (
                entry.path().unwrap().display().to_string(),
                header.entry_type(),
                header.mode().unwrap(),
                header.uid().unwrap(),
                content,
            )
        })
        .collect()
}

fn sample() -> ImageBuilder {
    ImageBuilder::new()
        .file("/usr/local/bin/tool", "#!binary", 0o755)
        .symlink("/bin/sh", "busybox")
        .directory("/home/nonroot", 0o700, 65532)
        .user("65532:65532")
        .entrypoint(&["tool"])
        .cmd(&["run"])
        .env("PATH", "/usr/local/bin")
        .expose(8443)
        .expose(8080)
        .label("org.opencontainers.image.title", "tool")
}

#[test]
fn the_layout_holds_a_manifest_naming_its_config_and_layer_by_digest() {
    let dir = tempfile::tempdir().unwrap();
    let layout = sample()
        .write_layout(&dir.path().join("img"), "registry.local/tool:v1")
        .unwrap();

    let index = read_json(&layout.dir.join("index.json"));
    let entry = &index["manifests"][0];
    assert_eq!(entry["digest"], layout.digest);
    assert_eq!(
        entry["annotations"]["io.containerd.image.name"],
        "registry.local/tool:v1"
    );
    assert_eq!(
        entry["annotations"]["org.opencontainers.image.ref.name"],
        "v1"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(&layout.dir, &layout.digest)).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&blob(
        &layout.dir,
        manifest["config"]["digest"].as_str().unwrap(),
    ))
    .unwrap();
    assert_eq!(config, layout.config);
    assert_eq!(config["architecture"], machine_architecture());
    assert_eq!(config["os"], "linux");
    let layer_digest = manifest["layers"][0]["digest"].as_str().unwrap();
    assert_eq!(config["rootfs"]["diff_ids"][0], layer_digest);
    let runtime = &config["config"];
    assert_eq!(runtime["User"], "65532:65532");
    assert_eq!(runtime["Entrypoint"], serde_json::json!(["tool"]));
    assert_eq!(runtime["Cmd"], serde_json::json!(["run"]));
    assert_eq!(runtime["Env"], serde_json::json!(["PATH=/usr/local/bin"]));
    assert_eq!(
        runtime["ExposedPorts"],
        serde_json::json!({"8080/tcp": {}, "8443/tcp": {}})
    );
    assert_eq!(runtime["Labels"]["org.opencontainers.image.title"], "tool");
}

#[test]
fn the_layer_has_every_parent_directory_before_its_entries_owned_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let layout = sample().write_layout(dir.path(), "t:1").unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(&layout.dir, &layout.digest)).unwrap();
    let layer = blob(
        &layout.dir,
        manifest["layers"][0]["digest"].as_str().unwrap(),
    );
    let found = entries(&layer);
    let paths: Vec<&str> = found.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        paths,
        [
            "bin/",
            "bin/sh",
            "home/",
            "home/nonroot/",
            "usr/",
            "usr/local/",
            "usr/local/bin/",
            "usr/local/bin/tool"
        ]
    );
    let tool = found.iter().find(|e| e.0 == "usr/local/bin/tool").unwrap();
    assert_eq!((tool.2, tool.3, tool.4.as_str()), (0o755, 0, "#!binary"));
    let home = found.iter().find(|e| e.0 == "home/nonroot/").unwrap();
    assert_eq!(
        (home.1, home.2, home.3),
        (tar::EntryType::Directory, 0o700, 65532)
    );
    let sh = found.iter().find(|e| e.0 == "bin/sh").unwrap();
    assert_eq!((sh.1, sh.4.as_str()), (tar::EntryType::Symlink, "busybox"));
}

#[test]
fn the_same_inputs_give_the_same_digest() {
    let dir = tempfile::tempdir().unwrap();
    let first = sample().write_layout(&dir.path().join("a"), "t:1").unwrap();
    let second = sample().write_layout(&dir.path().join("b"), "t:1").unwrap();
    let changed = sample()
        .cmd(&["other"])
        .write_layout(&dir.path().join("c"), "t:1")
        .unwrap();
    assert_eq!(first.digest, second.digest);
    assert_ne!(first.digest, changed.digest);
}

#[test]
fn a_host_file_that_is_missing_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let err = ImageBuilder::new()
        .host_file("/x", "/nonexistent/ocifit-binary", 0o755)
        .write_layout(dir.path(), "t:1")
        .unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/ocifit-binary"),
        "{err}"
    );
}

#[test]
fn the_layout_tar_holds_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let layout = sample()
        .write_layout(&dir.path().join("img"), "t:1")
        .unwrap();
    let archive = std::fs::read(layout.to_tar().unwrap()).unwrap();
    let names: Vec<String> = tar::Archive::new(archive.as_slice())
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(names.iter().any(|n| n.ends_with("index.json")), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with("oci-layout")), "{names:?}");
    let hex = layout.digest.trim_start_matches("sha256:");
    assert!(names.iter().any(|n| n.ends_with(hex)), "{names:?}");
}
