//! The ORAS artifact layout, both ways: what `oras push` writes (files as layers titled with
//! `org.opencontainers.image.title`, directories as `.tar.gz` layers marked
//! `io.deis.oras.content.unpack`, an empty config, an OCI image manifest with an `artifactType`)
//! and what a pull does with each layer of an artifact someone else pushed. Pure: no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::registry::{Descriptor, ImageManifest, OCI_MANIFEST};

/// Layer annotation: the file or directory name the layer is written to.
pub const TITLE: &str = "org.opencontainers.image.title";
/// Layer annotation: `"true"` when the layer is a `.tar.gz` of a directory to unpack.
pub const UNPACK: &str = "io.deis.oras.content.unpack";
/// Layer annotation: the digest of the uncompressed tar of a directory layer.
pub const TAR_DIGEST: &str = "io.deis.oras.content.digest";
/// Manifest annotation: when the artifact was made (RFC 3339).
pub(super) const CREATED: &str = "org.opencontainers.image.created";

/// A file's layer media type, as `oras push` gives it.
pub const FILE_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
/// A directory's layer media type (gzip-compressed tar), as `oras push` gives it.
pub const DIRECTORY_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The artifact type `oras push` gives an artifact when none is named.
pub const DEFAULT_ARTIFACT_TYPE: &str = "application/vnd.unknown.artifact.v1";
/// The empty config of OCI 1.1 artifacts: the two bytes `{}`.
pub(super) const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The empty config's content.
pub(super) const EMPTY_CONFIG: &[u8] = b"{}";

/// A layer pushed, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedLayer {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    pub annotations: BTreeMap<String, String>,
}

impl PushedLayer {
    /// A file's layer, titled with its name.
    pub fn file(title: &str, digest: String, size: u64) -> Self {
        PushedLayer {
            media_type: FILE_MEDIA_TYPE.to_string(),
            digest,
            size,
            annotations: BTreeMap::from([(TITLE.to_string(), title.to_string())]),
        }
    }

    /// A directory's `.tar.gz` layer. Unpacked: titled with the directory's name and marked for
    /// unpacking, with the uncompressed tar's digest; packed: titled `<name>.tar.gz`, kept as a
    /// file by every client.
    pub fn directory(
        name: &str,
        unpack: bool,
        digest: String,
        size: u64,
        tar_digest: String,
    ) -> Self {
        let annotations = if unpack {
            BTreeMap::from([
                (TITLE.to_string(), name.to_string()),
                (UNPACK.to_string(), "true".to_string()),
                (TAR_DIGEST.to_string(), tar_digest),
            ])
        } else {
            BTreeMap::from([
                (TITLE.to_string(), format!("{name}.tar.gz")),
                (UNPACK.to_string(), "false".to_string()),
            ])
        };
        PushedLayer {
            media_type: DIRECTORY_MEDIA_TYPE.to_string(),
            digest,
            size,
            annotations,
        }
    }

    /// The layer with the media type the pusher named, if any (`PATH:MEDIA_TYPE`).
    pub fn of_type(mut self, media_type: Option<String>) -> Self {
        if let Some(media_type) = media_type {
            self.media_type = media_type;
        }
        self
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestOut<'a> {
    schema_version: u32,
    media_type: &'static str,
    artifact_type: &'a str,
    config: DescriptorOut<'a>,
    layers: Vec<DescriptorOut<'a>>,
    annotations: BTreeMap<&'static str, &'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DescriptorOut<'a> {
    media_type: &'a str,
    digest: &'a str,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a BTreeMap<String, String>>,
}

/// The manifest of an artifact of these layers, as `oras push` writes it (OCI image manifest,
/// `artifactType`, the empty config inline, a creation time).
pub(super) fn manifest_json(
    layers: &[PushedLayer],
    artifact_type: &str,
    created: &str,
) -> Result<Vec<u8>, serde_json::Error> {
    let empty_digest = crate::registry::sha256_digest(EMPTY_CONFIG);
    let manifest = ManifestOut {
        schema_version: 2,
        media_type: OCI_MANIFEST,
        artifact_type,
        config: DescriptorOut {
            media_type: EMPTY_CONFIG_MEDIA_TYPE,
            digest: &empty_digest,
            size: EMPTY_CONFIG.len() as u64,
            // base64 of `{}`, as OCI 1.1 embeds the empty descriptor's data.
            data: Some("e30="),
            annotations: None,
        },
        layers: layers
            .iter()
            .map(|layer| DescriptorOut {
                media_type: &layer.media_type,
                digest: &layer.digest,
                size: layer.size,
                data: None,
                annotations: Some(&layer.annotations),
            })
            .collect(),
        annotations: BTreeMap::from([(CREATED, created)]),
    };
    serde_json::to_vec(&manifest)
}

/// What a pull does with one layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LayerAction {
    /// Write the blob as the file `path`.
    File { path: PathBuf, layer: Descriptor },
    /// Unpack the blob (a `.tar.gz` whose entries all lie under `path`) as the directory `path`;
    /// `tar_digest` is the uncompressed tar's digest when the pusher recorded it.
    Unpack {
        path: PathBuf,
        layer: Descriptor,
        tar_digest: Option<String>,
    },
}

impl LayerAction {
    /// Where the layer lands, relative to the output directory.
    pub(super) fn path(&self) -> &Path {
        match self {
            LayerAction::File { path, .. } | LayerAction::Unpack { path, .. } => path,
        }
    }
}

/// Why an artifact cannot be pulled as files.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("the artifact has no layers")]
    NoLayers,
    #[error("layer {digest} has no {TITLE} annotation, so it has no file name")]
    Untitled { digest: String },
    #[error("layer {digest} is titled {title:?}, {why}")]
    UnsafeTitle {
        digest: String,
        title: String,
        why: &'static str,
    },
    #[error("several layers are titled {0:?}")]
    DuplicateTitle(String),
    #[error("layer {title:?} lies inside layer {inside:?}")]
    NestedTitle { title: String, inside: String },
}

/// What to do with each layer: files are written under their title; a layer marked
/// `io.deis.oras.content.unpack: "true"`, or an unmarked `.tar+gzip` one (the ORAS Python SDK's
/// directories), is unpacked, or with `unpack` false written as `<title>.tar.gz`.
pub(super) fn plan_pull(
    manifest: &ImageManifest,
    unpack: bool,
) -> Result<Vec<LayerAction>, LayoutError> {
    if manifest.layers.is_empty() {
        return Err(LayoutError::NoLayers);
    }
    let mut actions = Vec::with_capacity(manifest.layers.len());
    let mut seen = BTreeSet::new();
    for layer in &manifest.layers {
        let title = layer
            .annotations
            .get(TITLE)
            .ok_or_else(|| LayoutError::Untitled {
                digest: layer.digest.clone(),
            })?;
        let path = safe_relative(title).map_err(|why| LayoutError::UnsafeTitle {
            digest: layer.digest.clone(),
            title: title.clone(),
            why,
        })?;
        let marked = match layer.annotations.get(UNPACK).map(String::as_str) {
            Some(value) => value == "true",
            None => layer.media_type == DIRECTORY_MEDIA_TYPE,
        };
        let names_no_file = path.as_os_str().is_empty() && !(marked && unpack);
        if names_no_file {
            return Err(LayoutError::UnsafeTitle {
                digest: layer.digest.clone(),
                title: title.clone(),
                why: "which names no file",
            });
        }
        let action = match (marked, unpack) {
            (true, true) => LayerAction::Unpack {
                path,
                layer: layer.clone(),
                tar_digest: layer.annotations.get(TAR_DIGEST).cloned(),
            },
            (true, false) => LayerAction::File {
                path: PathBuf::from(format!("{}.tar.gz", path.display())),
                layer: layer.clone(),
            },
            (false, _) => LayerAction::File {
                path,
                layer: layer.clone(),
            },
        };
        if !seen.insert(action.path().to_path_buf()) {
            return Err(LayoutError::DuplicateTitle(title.clone()));
        }
        actions.push(action);
    }
    // A layer written inside another's path would be overwritten or mixed into it.
    for action in &actions {
        for ancestor in action.path().ancestors().skip(1) {
            if seen.contains(ancestor) {
                return Err(LayoutError::NestedTitle {
                    title: action.path().display().to_string(),
                    inside: ancestor.display().to_string(),
                });
            }
        }
    }
    Ok(actions)
}

/// A relative path of normal components only (no `..`, no root), as a title or a tar entry must be
/// to stay inside the output directory; `.` is the empty path (the directory itself).
pub(super) fn safe_relative(text: &str) -> Result<PathBuf, &'static str> {
    if text.is_empty() {
        return Err("empty");
    }
    if text.contains('\0') {
        return Err("which contains a NUL byte");
    }
    let mut path = PathBuf::new();
    for component in Path::new(text).components() {
        match component {
            Component::Normal(part) => path.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("which climbs out with `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("which is absolute"),
        }
    }
    Ok(path)
}

#[cfg(test)]
mod tests;
