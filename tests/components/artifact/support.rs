//! The ORAS Python SDK and ocifit's own binary as the two sides of artifact transfers, against the
//! test kit's real registry: the SDK pushes and pulls as `oras-py` users do (files by name,
//! directories as its `.tar.gz`), ocifit as a step's helper does (`ocifit artifact …`).

use std::path::{Path, PathBuf};
use std::process::Output;

use ocifit_testkit::{Registry, Tool, Tools, oras_sdk_pull};

/// Pushes the named paths (relative to `cwd`, so layers are titled with them) with the SDK.
const SDK_PUSH: &str = r#"
import json, sys
import oras.client
request = json.loads(sys.argv[1])
client = oras.client.OrasClient(hostname=request["registry"], insecure=True, auth_backend="basic")
response = client.push(target=request["target"], files=request["files"], disable_path_validation=True, quiet=True)
print(response.headers["Docker-Content-Digest"])
"#;

/// Pushes one blob under a layer title the SDK would never write (e.g. `../escape.txt`), through
/// the SDK's own upload calls, as a hostile pusher could.
const SDK_PUSH_TITLED: &str = r#"
import json, sys
import oras.client, oras.oci, oras.defaults
request = json.loads(sys.argv[1])
client = oras.client.OrasClient(hostname=request["registry"], insecure=True, auth_backend="basic")
container = client.get_container(request["target"])
layer = oras.oci.NewLayer(request["file"], is_dir=False)
layer["annotations"] = {oras.defaults.annotation_title: request["title"]}
client._check_200_response(client.upload_blob(request["file"], container, layer))
manifest = oras.oci.NewManifest()
manifest["layers"] = [layer]
conf, _ = oras.oci.ManifestConfig()
with open(request["config"], "w") as f:
    f.write("{}")
client._check_200_response(client.upload_blob(request["config"], container, conf))
manifest["config"] = conf
client._check_200_response(client.upload_manifest(manifest, container))
"#;

/// Copies a manifest to another tag with one annotation of its first layer changed.
const SDK_EDIT: &str = r#"
import json, sys
import oras.client
request = json.loads(sys.argv[1])
client = oras.client.OrasClient(hostname=request["registry"], insecure=True, auth_backend="basic")
manifest = client.get_manifest(client.get_container(request["source"]))
manifest["layers"][0]["annotations"][request["key"]] = request["value"]
client._check_200_response(client.upload_manifest(manifest, client.get_container(request["target"])))
"#;

fn python() -> PathBuf {
    Tools::locate().unwrap().path(Tool::OrasPython).unwrap()
}

fn sdk(registry: &Registry, script: &str, request: serde_json::Value, cwd: &Path) -> Output {
    let mut command = std::process::Command::new(python());
    // The SDK leaves a directory's `.tar.gz` in its temporary directory: the test's, removed with it.
    command
        .current_dir(cwd)
        .env("TMPDIR", cwd)
        .args(["-c", script, &request.to_string()]);
    logged_in(registry, command)
}

/// Runs `command` with the registry's credentials, when it has any, where the SDK reads them.
fn logged_in(registry: &Registry, mut command: std::process::Command) -> Output {
    if let Some(credentials) = registry.credentials() {
        command
            .env("ORAS_USER", &credentials.username)
            .env("ORAS_PASS", &credentials.password);
    }
    command.output().unwrap()
}

fn succeeded(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// SDK push of `files` (relative to `cwd`); the manifest digest.
pub fn sdk_push(registry: &Registry, target: &str, cwd: &Path, files: &[&str]) -> String {
    let request =
        serde_json::json!({"registry": registry.addr(), "target": target, "files": files});
    succeeded(sdk(registry, SDK_PUSH, request, cwd), "the SDK's push")
        .trim()
        .to_string()
}

/// SDK pull into `outdir`; the paths it wrote.
pub fn sdk_pull(registry: &Registry, target: &str, outdir: &Path) -> Vec<PathBuf> {
    let command = oras_sdk_pull(registry.addr(), target, outdir).unwrap();
    succeeded(logged_in(registry, command), "the SDK's pull")
        .lines()
        .map(PathBuf::from)
        .collect()
}

/// A one-layer artifact whose layer is titled `title`, whatever it says.
pub fn sdk_push_titled(registry: &Registry, target: &str, file: &Path, title: &str) {
    let config = file.with_extension("config.json");
    let request = serde_json::json!({
        "registry": registry.addr(), "target": target, "file": file, "title": title, "config": config
    });
    succeeded(
        sdk(registry, SDK_PUSH_TITLED, request, file.parent().unwrap()),
        "the hostile push",
    );
}

/// Tags `source`'s manifest as `target` with its first layer's annotation `key` set to `value`.
pub fn sdk_edit_layer_annotation(
    registry: &Registry,
    source: &str,
    target: &str,
    key: &str,
    value: &str,
) {
    let request = serde_json::json!({
        "registry": registry.addr(), "source": source, "target": target, "key": key, "value": value
    });
    let cwd = std::env::temp_dir();
    succeeded(sdk(registry, SDK_EDIT, request, &cwd), "the manifest edit");
}

/// `ocifit artifact <args>` against the registry over plain HTTP, with `env` added.
pub fn ocifit(args: &[&str], env: &[(&str, &str)]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ocifit"))
        .arg("artifact")
        .args(args)
        .env_remove("ORAS_USER")
        .env_remove("ORAS_PULL_PASS")
        .env_remove("ORAS_PUSH_PASS")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `ocifit artifact <args>`, which must succeed; its stdout.
pub fn ocifit_ok(args: &[&str], env: &[(&str, &str)]) -> String {
    succeeded(ocifit(args, env), &format!("ocifit artifact {args:?}"))
}

/// Every regular file under `root` with its content, by relative path.
pub fn tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = walk(root)
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            let content = std::fs::read(&path).unwrap();
            (relative, content)
        })
        .collect();
    files.sort();
    files
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
        if kind.is_dir() {
            found.extend(walk(&path));
        } else if kind.is_file() {
            found.push(path);
        }
    }
    found
}

/// A directory of `files` (relative path, content) under `root/name`.
pub fn make_tree(root: &Path, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = root.join(name);
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}
