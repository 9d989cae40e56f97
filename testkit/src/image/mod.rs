//! OCI images assembled without a container engine: files, directories and symlinks packed into
//! one uncompressed tar layer, an image config, a manifest and an `index.json`, written as an OCI
//! image layout directory. crane pushes such a layout to a registry ([`crate::Registry::push_layout`]);
//! containerd imports it as a tar (the real node's sandbox image). The recipes of the images the
//! project builds this way (ocifit's own, the flavor images, pause) are in `recipes`.

mod elf;
mod recipes;

pub use elf::{foreign_architecture, foreign_image};
pub use recipes::{flavor_image, ocifit_image, pause_image, registry_image, step_image};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::command::Invocation;
use crate::error::{Error, Result, io};
use crate::registry::sha256_digest;
use crate::tools::{Tool, Tools};

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
/// The annotation containerd's `ctr images import` reads an image's name from.
const CONTAINERD_NAME: &str = "io.containerd.image.name";
/// The standard annotation naming an image in a layout.
const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// What a layer entry holds.
#[derive(Clone, Debug)]
enum Content {
    /// A regular file's bytes, read from the host when the layer is written.
    HostFile(PathBuf),
    /// A regular file's bytes.
    Bytes(Vec<u8>),
    /// A directory.
    Directory,
    /// A symbolic link to this target.
    Symlink(String),
}

#[derive(Clone, Debug)]
struct Entry {
    content: Content,
    mode: u32,
    owner: u64,
}

/// An image to assemble: the root filesystem's entries by absolute path, and the config.
#[derive(Clone, Debug)]
pub struct ImageBuilder {
    entries: BTreeMap<String, Entry>,
    os: String,
    architecture: String,
    config: Config,
}

/// The image config's `config` section, as far as the kit's images use it.
#[derive(Clone, Debug, Default)]
struct Config {
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    user: Option<String>,
    working_dir: Option<String>,
    env: Vec<String>,
    exposed_ports: BTreeSet<String>,
    labels: BTreeMap<String, String>,
}

impl Config {
    fn to_json(&self) -> serde_json::Value {
        let mut config = serde_json::Map::new();
        let mut put = |key: &str, value: serde_json::Value| {
            config.insert(key.to_owned(), value);
        };
        if let Some(entrypoint) = &self.entrypoint {
            put("Entrypoint", serde_json::json!(entrypoint));
        }
        if let Some(cmd) = &self.cmd {
            put("Cmd", serde_json::json!(cmd));
        }
        if let Some(user) = &self.user {
            put("User", user.as_str().into());
        }
        if let Some(dir) = &self.working_dir {
            put("WorkingDir", dir.as_str().into());
        }
        if !self.env.is_empty() {
            put("Env", serde_json::json!(self.env));
        }
        if !self.exposed_ports.is_empty() {
            let ports: serde_json::Map<String, serde_json::Value> = self
                .exposed_ports
                .iter()
                .map(|port| (port.clone(), serde_json::json!({})))
                .collect();
            put("ExposedPorts", ports.into());
        }
        if !self.labels.is_empty() {
            put("Labels", serde_json::json!(self.labels));
        }
        serde_json::Value::Object(config)
    }
}

/// A written OCI image layout.
#[derive(Clone, Debug)]
pub struct ImageLayout {
    /// The layout directory (`oci-layout`, `index.json`, `blobs/sha256/`).
    pub dir: PathBuf,
    /// The manifest's digest, `sha256:<hex>`.
    pub digest: String,
    /// The image config as written.
    pub config: serde_json::Value,
}

impl Default for ImageBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ImageBuilder {
    /// An empty linux image for this machine's architecture.
    pub fn new() -> Self {
        Self {
            entries: BTreeMap::new(),
            os: "linux".into(),
            architecture: machine_architecture().into(),
            config: Config::default(),
        }
    }

    /// Copies the host file `source` to `path` (absolute, in the image) with `mode`.
    pub fn host_file(mut self, path: &str, source: impl Into<PathBuf>, mode: u32) -> Self {
        self.insert(path, Content::HostFile(source.into()), mode, 0);
        self
    }

    /// A file at `path` holding `content`.
    pub fn file(mut self, path: &str, content: impl Into<Vec<u8>>, mode: u32) -> Self {
        self.insert(path, Content::Bytes(content.into()), mode, 0);
        self
    }

    /// A directory at `path` owned by `owner` (UID and GID).
    pub fn directory(mut self, path: &str, mode: u32, owner: u64) -> Self {
        self.insert(path, Content::Directory, mode, owner);
        self
    }

    /// A symbolic link at `path` to `target`.
    pub fn symlink(mut self, path: &str, target: &str) -> Self {
        self.insert(path, Content::Symlink(target.into()), 0o777, 0);
        self
    }

    /// The platform's architecture the config says (this machine's unless set).
    pub fn architecture(mut self, architecture: &str) -> Self {
        self.architecture = architecture.into();
        self
    }

    /// `config.Entrypoint`.
    pub fn entrypoint(mut self, args: &[&str]) -> Self {
        self.config.entrypoint = Some(strings(args));
        self
    }

    /// `config.Cmd`.
    pub fn cmd(mut self, args: &[&str]) -> Self {
        self.config.cmd = Some(strings(args));
        self
    }

    /// `config.User`.
    pub fn user(mut self, user: &str) -> Self {
        self.config.user = Some(user.into());
        self
    }

    /// `config.WorkingDir`: where the container starts when its pod names no `workingDir`.
    pub fn working_dir(mut self, dir: &str) -> Self {
        self.config.working_dir = Some(dir.into());
        self
    }

    /// Appends `KEY=VALUE` to `config.Env`.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.config.env.push(format!("{key}={value}"));
        self
    }

    /// Adds `PORT/tcp` to `config.ExposedPorts`.
    pub fn expose(mut self, port: u16) -> Self {
        self.config.exposed_ports.insert(format!("{port}/tcp"));
        self
    }

    /// Adds a label to `config.Labels`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.config.labels.insert(key.into(), value.into());
        self
    }

    /// Writes the layout into `dir` (created), its index naming the image `name` (e.g.
    /// `registry.local/pause:v1`) for containerd's import.
    pub fn write_layout(&self, dir: &Path, name: &str) -> Result<ImageLayout> {
        let blobs = dir.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).map_err(io("create directory", &blobs))?;
        let layer = self.layer()?;
        let layer_digest = write_blob(&blobs, &layer)?;
        let config = serde_json::json!({
            "architecture": self.architecture,
            "os": self.os,
            "config": self.config.to_json(),
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        });
        let config_bytes = to_json(&config)?;
        let config_digest = write_blob(&blobs, &config_bytes)?;
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": {"mediaType": CONFIG, "digest": config_digest, "size": config_bytes.len()},
            "layers": [{"mediaType": LAYER, "digest": layer_digest, "size": layer.len()}],
        });
        let manifest_bytes = to_json(&manifest)?;
        let digest = write_blob(&blobs, &manifest_bytes)?;
        let tag = name.rsplit_once(':').map_or("latest", |(_, tag)| tag);
        let index = serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": MANIFEST,
                "digest": digest,
                "size": manifest_bytes.len(),
                "annotations": {CONTAINERD_NAME: name, REF_NAME: tag},
            }],
        });
        write(&dir.join("index.json"), &to_json(&index)?)?;
        write(
            &dir.join("oci-layout"),
            br#"{"imageLayoutVersion":"1.0.0"}"#,
        )?;
        Ok(ImageLayout {
            dir: dir.to_owned(),
            digest,
            config,
        })
    }

    fn insert(&mut self, path: &str, content: Content, mode: u32, owner: u64) {
        let path = path.trim_start_matches('/').to_owned();
        // Every parent is a directory entry, so the layer never relies on the unpacker's defaults.
        let mut parent = Path::new(&path).parent();
        while let Some(dir) = parent.filter(|p| !p.as_os_str().is_empty()) {
            self.entries
                .entry(dir.to_string_lossy().into_owned())
                .or_insert(Entry {
                    content: Content::Directory,
                    mode: 0o755,
                    owner: 0,
                });
            parent = dir.parent();
        }
        self.entries.insert(
            path,
            Entry {
                content,
                mode,
                owner,
            },
        );
    }

    /// The layer: entries in path order (parents first), owned by root unless said otherwise,
    /// with time 0 so the same inputs give the same digest.
    fn layer(&self) -> Result<Vec<u8>> {
        let mut archive = tar::Builder::new(Vec::new());
        let failed = |path: &str| {
            let path = PathBuf::from(format!("/{path}"));
            move |source| Error::Io {
                action: "pack into the image layer",
                path,
                source,
            }
        };
        for (path, entry) in &self.entries {
            let mut header = tar::Header::new_gnu();
            header.set_mode(entry.mode);
            header.set_uid(entry.owner);
            header.set_gid(entry.owner);
            header.set_mtime(0);
            match &entry.content {
                Content::Directory => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_size(0);
                    archive
                        .append_data(&mut header, format!("{path}/"), std::io::empty())
                        .map_err(failed(path))?;
                }
                Content::Symlink(target) => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_size(0);
                    archive
                        .append_link(&mut header, path, target)
                        .map_err(failed(path))?;
                }
                Content::Bytes(bytes) => {
                    header.set_size(bytes.len() as u64);
                    archive
                        .append_data(&mut header, path, bytes.as_slice())
                        .map_err(failed(path))?;
                }
                Content::HostFile(source) => {
                    let bytes = std::fs::read(source).map_err(io("read", source))?;
                    header.set_size(bytes.len() as u64);
                    archive
                        .append_data(&mut header, path, bytes.as_slice())
                        .map_err(failed(path))?;
                }
            }
        }
        archive.into_inner().map_err(failed("(end of archive)"))
    }
}

impl ImageLayout {
    /// The paths in the image's layer, as packed (directories end in `/`).
    pub fn paths(&self) -> Result<Vec<String>> {
        let blob = |digest: &str| {
            let path = self
                .dir
                .join("blobs/sha256")
                .join(digest.trim_start_matches("sha256:"));
            std::fs::read(&path).map_err(io("read", path))
        };
        let manifest: serde_json::Value =
            serde_json::from_slice(&blob(&self.digest)?).map_err(|e| Error::Format {
                action: "read the image's manifest".into(),
                message: e.to_string(),
            })?;
        let mut paths = Vec::new();
        for layer in manifest["layers"].as_array().into_iter().flatten() {
            let bytes = blob(layer["digest"].as_str().unwrap_or_default())?;
            let unreadable = |e: std::io::Error| Error::Format {
                action: "read the image's layer".into(),
                message: e.to_string(),
            };
            for entry in tar::Archive::new(bytes.as_slice())
                .entries()
                .map_err(unreadable)?
            {
                let entry = entry.map_err(unreadable)?;
                let path = entry.path().map_err(unreadable)?;
                paths.push(path.to_string_lossy().into_owned());
            }
        }
        Ok(paths)
    }

    /// The layout packed as one tar, the form `ctr images import` reads; written beside the layout
    /// directory as `<dir>.tar`.
    pub fn to_tar(&self) -> Result<PathBuf> {
        let path = self.dir.with_extension("tar");
        let file = std::fs::File::create(&path).map_err(io("create", &path))?;
        let mut archive = tar::Builder::new(file);
        archive
            .append_dir_all(".", &self.dir)
            .and_then(|()| archive.finish())
            .map_err(io("pack the image layout into", &path))?;
        Ok(path)
    }
}

/// Writes `image`'s layout into `dir` and pushes it as `reference` with `crane push` (over plain
/// HTTP when `insecure`); the layout.
pub async fn push(
    image: &ImageBuilder,
    dir: &Path,
    reference: &str,
    insecure: bool,
) -> Result<ImageLayout> {
    let crane = Tools::locate()?.path(Tool::Crane)?;
    let layout = image.write_layout(dir, reference)?;
    let insecure = insecure.then_some("--insecure");
    Invocation::new(crane)
        .args(insecure)
        .args([
            std::ffi::OsString::from("push"),
            layout.dir.clone().into_os_string(),
            reference.into(),
        ])
        .run()
        .await?;
    Ok(layout)
}

/// The OCI name of this machine's architecture.
pub fn machine_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

fn to_json(value: &serde_json::Value) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| Error::Format {
        action: "write an image's JSON".into(),
        message: e.to_string(),
    })
}

/// Writes `bytes` as a blob; its digest.
fn write_blob(blobs: &Path, bytes: &[u8]) -> Result<String> {
    let digest = sha256_digest(bytes);
    write(&blobs.join(digest.trim_start_matches("sha256:")), bytes)?;
    Ok(digest)
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(io("write", path))
}

#[cfg(test)]
mod tests;
