//! The OCI and Docker manifest shapes this room reads, their media types, and content digests;
//! which layer of an artifact manifest holds the compatibility document, decided by media type
//! only (never by trying to parse); and which referrer of an image is its NFD artifact (the NFD
//! artifactType, newest by `org.opencontainers.image.created`). Only the fields a decision needs
//! are modelled; unknown fields are ignored. Pure: no I/O.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Deserialize;
use sha2::{Digest as _, Sha256, Sha512};

use super::error::ContentProblem;
use crate::engine::{Format, NFD_ARTIFACT_TYPE, NFD_LAYER_MEDIA_TYPE, OCIFIT_LAYER_MEDIA_TYPE};

/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index.
pub(super) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker schema 2 image manifest.
pub(super) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker schema 2 manifest list.
pub(super) const DOCKER_MANIFEST_LIST: &str =
    "application/vnd.docker.distribution.manifest.list.v2+json";

/// Every manifest media type we ask registries for.
pub(super) const MANIFEST_ACCEPT: [&str; 4] = [
    OCI_MANIFEST,
    OCI_INDEX,
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
];

/// The annotation that says when an artifact was created (RFC 3339).
pub(super) const CREATED_ANNOTATION: &str = "org.opencontainers.image.created";

/// A content descriptor: what a manifest or index points at.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    #[serde(default)]
    pub size: i64,
    #[serde(default)]
    pub artifact_type: Option<String>,
    #[serde(default)]
    pub platform: Option<PlatformField>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A platform as written in an index entry or an image config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PlatformField {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub variant: Option<String>,
    #[serde(default, rename = "os.version")]
    pub os_version: Option<String>,
}

/// A manifest or an index; which one is decided by `mediaType` (falling back to the shape, as
/// registries and Docker's older tools omit `mediaType` from the body).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawManifest {
    #[serde(default)]
    pub schema_version: Option<i64>,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub artifact_type: Option<String>,
    #[serde(default)]
    pub config: Option<Descriptor>,
    #[serde(default)]
    pub layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    pub manifests: Option<Vec<Descriptor>>,
}

/// An image (or artifact) manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageManifest {
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// An image index (or Docker manifest list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ImageIndex {
    pub manifests: Vec<Descriptor>,
}

/// A parsed manifest body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Manifest {
    Image(Box<ImageManifest>),
    Index(ImageIndex),
}

impl Manifest {
    /// Parses a manifest body. `header_type` is the response's Content-Type, used when the body
    /// does not name its own media type.
    pub(super) fn parse(body: &[u8], header_type: Option<&str>) -> Result<Self, ContentProblem> {
        let raw: RawManifest = serde_json::from_slice(body)
            .map_err(|err| ContentProblem::NotAManifest(err.to_string()))?;
        if raw.schema_version.is_some_and(|v| v != 2) {
            return Err(ContentProblem::NotAManifest(format!(
                "unsupported schemaVersion {}",
                raw.schema_version.unwrap_or_default()
            )));
        }
        let media_type = raw
            .media_type
            .clone()
            .or_else(|| header_type.map(|t| t.split(';').next().unwrap_or(t).trim().to_string()));
        match media_type.as_deref() {
            Some(OCI_INDEX | DOCKER_MANIFEST_LIST) => index(raw),
            Some(OCI_MANIFEST | DOCKER_MANIFEST) => image(raw),
            Some(other) if raw.manifests.is_none() && raw.layers.is_none() => {
                Err(ContentProblem::UnsupportedMediaType(other.to_string()))
            }
            _ if raw.manifests.is_some() => index(raw),
            _ => image(raw),
        }
    }
}

fn index(raw: RawManifest) -> Result<Manifest, ContentProblem> {
    Ok(Manifest::Index(ImageIndex {
        manifests: raw.manifests.unwrap_or_default(),
    }))
}

fn image(raw: RawManifest) -> Result<Manifest, ContentProblem> {
    let config = raw
        .config
        .ok_or_else(|| ContentProblem::NotAManifest("image manifest has no config".into()))?;
    Ok(Manifest::Image(Box::new(ImageManifest {
        artifact_type: raw.artifact_type,
        config,
        layers: raw.layers.unwrap_or_default(),
    })))
}

/// True when a descriptor's media type names an index rather than an image manifest.
pub(super) fn is_index_media_type(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_MANIFEST_LIST
}

/// The sha256 digest of some content, as `sha256:<hex>`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// Checks that `bytes` hash to `expected` (`sha256:` or `sha512:`).
pub(super) fn verify_digest(expected: &str, bytes: &[u8]) -> Result<(), ContentProblem> {
    let actual = match expected.split_once(':') {
        Some(("sha256", _)) => sha256_digest(bytes),
        Some(("sha512", _)) => format!("sha512:{}", hex(&Sha512::digest(bytes))),
        _ => return Err(ContentProblem::UnsupportedDigest(expected.to_string())),
    };
    if actual == expected {
        Ok(())
    } else {
        Err(ContentProblem::DigestMismatch {
            expected: expected.to_string(),
            actual,
        })
    }
}

/// Checks that a string is a digest this client can verify, so it is safe to put in a URL.
pub(super) fn is_valid_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let len = match algorithm {
        "sha256" => 64,
        "sha512" => 128,
        _ => return false,
    };
    hex.len() == len
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Lowercase hexadecimal of some bytes (a digest's value).
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The chosen layer and the format it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChosenLayer {
    pub format: Format,
    pub layer: Descriptor,
}

/// Picks the one compatibility layer of an artifact manifest: the ocifit or NFD media type, else
/// an NFD artifact's only layer whatever its media type (as NFD's client reads layer 0). Two
/// candidates, or none, are an error rather than a guess.
pub(super) fn choose_layer(manifest: &ImageManifest) -> Result<ChosenLayer, ContentProblem> {
    let known: Vec<ChosenLayer> = manifest
        .layers
        .iter()
        .filter_map(|layer| {
            let format = match layer.media_type.as_str() {
                OCIFIT_LAYER_MEDIA_TYPE => Format::Ocifit,
                NFD_LAYER_MEDIA_TYPE => Format::Nfd,
                _ => return None,
            };
            Some(ChosenLayer {
                format,
                layer: layer.clone(),
            })
        })
        .collect();
    match known.as_slice() {
        [one] => return Ok(one.clone()),
        [] => {}
        many => {
            return Err(ContentProblem::AmbiguousLayers {
                found: many.iter().map(|c| c.layer.media_type.clone()).collect(),
            });
        }
    }
    let nfd_artifact = manifest.artifact_type.as_deref() == Some(NFD_ARTIFACT_TYPE)
        || manifest.config.media_type == NFD_ARTIFACT_TYPE;
    if let (true, [only]) = (nfd_artifact, manifest.layers.as_slice()) {
        return Ok(ChosenLayer {
            format: Format::Nfd,
            layer: only.clone(),
        });
    }
    let mut found: Vec<String> = manifest.artifact_type.iter().cloned().collect();
    found.extend(manifest.layers.iter().map(|l| l.media_type.clone()));
    Err(ContentProblem::NoKnownLayer {
        expected: format!("{OCIFIT_LAYER_MEDIA_TYPE} or {NFD_LAYER_MEDIA_TYPE}"),
        found,
    })
}

/// Picks the newest NFD artifact among an image's referrers, filtered here too since the
/// referrers tag fallback cannot filter. An undated entry is older than any dated one; on equal
/// times the one listed last wins, as registries append.
pub(super) fn newest_nfd_referrer(referrers: &[Descriptor]) -> Option<&Descriptor> {
    referrers
        .iter()
        .filter(|d| d.artifact_type.as_deref() == Some(NFD_ARTIFACT_TYPE))
        .max_by_key(|d| created(d))
}

fn created(descriptor: &Descriptor) -> Option<Timestamp> {
    descriptor
        .annotations
        .get(CREATED_ANNOTATION)
        .and_then(|text| text.parse::<Timestamp>().ok())
}

#[cfg(test)]
mod tests;
