//! Puts content into the test registry with the real clients: artifacts with the ORAS Python SDK,
//! attached NFD-style artifacts with `regctl artifact put --subject`, and small single- and
//! multi-platform images (and an index with an attestation-like `unknown/unknown` entry) with crane
//! and regctl. Nothing here reads content back for the code under test.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Registry;
use crate::command::Invocation;
use crate::error::{Error, Result, io};
use crate::tools::Tool;

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// Pushes one file as an artifact with the ORAS SDK and prints the manifest's digest. The SDK has no
/// artifact-type option, so the manifest it builds gets the OCI 1.1 `artifactType` field here.
const ORAS_PUSH: &str = r#"
import json, sys
import oras.client, oras.oci

request = json.loads(sys.argv[1])

class Client(oras.client.OrasClient):
    def upload_manifest(self, manifest, container):
        if request["artifact_type"]:
            manifest["artifactType"] = request["artifact_type"]
        return super().upload_manifest(manifest, container)

client = Client(hostname=request["registry"], insecure=True, auth_backend="basic")
subject = oras.oci.Subject(**request["subject"]) if request["subject"] else None
response = client.push(
    target=request["target"],
    files=[request["file"] + ":" + request["media_type"]],
    disable_path_validation=True,
    subject=subject,
    quiet=True,
)
print(response.headers["Docker-Content-Digest"])
"#;

/// A manifest's descriptor, as a referrer's `subject` or an index entry names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// The manifest's media type.
    pub media_type: String,
    /// `sha256:<hex>` of its bytes.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
}

/// An image or index pushed by the kit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedImage {
    /// `127.0.0.1:PORT/<repository>:<tag>`.
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
}

impl PushedImage {
    /// `127.0.0.1:PORT/<repository>@<digest>`.
    pub fn by_digest(&self) -> String {
        let repository = match self.reference.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => repository,
            _ => &self.reference,
        };
        format!("{repository}@{}", self.digest)
    }
}

/// An artifact for [`Registry::push_artifact`]: one file as one layer.
#[derive(Clone, Debug)]
pub struct OrasArtifact<'a> {
    /// Where to push: `127.0.0.1:PORT/<repository>:<tag>`.
    pub reference: &'a str,
    /// The file to push.
    pub file: &'a Path,
    /// The layer's media type.
    pub media_type: &'a str,
    /// The manifest's `artifactType`, if any.
    pub artifact_type: Option<&'a str>,
    /// A reference to the manifest this artifact refers to (attach), if any.
    pub subject: Option<&'a str>,
}

impl<'a> OrasArtifact<'a> {
    /// An artifact without an artifact type or subject.
    pub fn new(reference: &'a str, file: &'a Path, media_type: &'a str) -> Self {
        Self {
            reference,
            file,
            media_type,
            artifact_type: None,
            subject: None,
        }
    }

    /// Sets the manifest's `artifactType`.
    pub fn artifact_type(mut self, artifact_type: &'a str) -> Self {
        self.artifact_type = Some(artifact_type);
        self
    }

    /// Attaches the artifact to `subject` (a reference to a manifest).
    pub fn subject(mut self, subject: &'a str) -> Self {
        self.subject = Some(subject);
        self
    }
}

impl Registry {
    /// Pushes an artifact with the ORAS Python SDK; the digest of its manifest.
    pub async fn push_artifact(&self, artifact: &OrasArtifact<'_>) -> Result<String> {
        let subject = match artifact.subject {
            Some(subject) => Some(self.descriptor(subject).await?),
            None => None,
        };
        let request = serde_json::json!({
            "registry": self.addr,
            "target": artifact.reference,
            "file": artifact.file,
            "media_type": artifact.media_type,
            "artifact_type": artifact.artifact_type,
            "subject": subject,
        });
        let mut invocation = Invocation::new(self.tools.path(Tool::OrasPython)?)
            .args(["-c", ORAS_PUSH])
            .args([request.to_string()]);
        for (key, value) in &self.client_env {
            invocation = invocation.env(key, value.clone());
        }
        if let Some(credentials) = &self.credentials {
            invocation = invocation
                .env("ORAS_USER", &credentials.username)
                .env("ORAS_PASS", &credentials.password);
        }
        let output = invocation.run().await?;
        Ok(output.lines().last().unwrap_or_default().trim().to_owned())
    }

    /// Attaches `file` to `subject` with `regctl artifact put --subject`, as NFD's image
    /// compatibility artifacts are attached; the digest of the artifact's manifest.
    pub async fn attach_artifact(
        &self,
        subject: &str,
        artifact_type: &str,
        file: &Path,
        file_media_type: &str,
    ) -> Result<String> {
        let mut args = ["artifact", "put", "--artifact-type", artifact_type]
            .map(OsString::from)
            .to_vec();
        args.extend(
            ["--subject", subject, "--file-media-type", file_media_type].map(OsString::from),
        );
        args.extend([OsString::from("--file"), file.into()]);
        args.extend(["--format", "{{ .Manifest.GetDescriptor.Digest }}"].map(OsString::from));
        let output = self.regctl(args).await?;
        Ok(output.trim().to_owned())
    }

    /// Pushes a small image for one `platform` (`os/arch[/variant]`) as `<repository>:<tag>`.
    pub async fn push_image(
        &self,
        repository: &str,
        tag: &str,
        platform: &str,
    ) -> Result<PushedImage> {
        let reference = self.reference(&format!("{repository}:{tag}"));
        let layer = self.layer(platform)?;
        // crane appends to an empty base that has no platform; mutate sets it.
        let mut append = ["append", "--oci-empty-base", "-t", &reference]
            .map(OsString::from)
            .to_vec();
        append.extend([OsString::from("-f"), layer.into()]);
        self.crane(append).await?;
        self.crane([
            "mutate",
            "--set-platform",
            platform,
            "-t",
            &reference,
            &reference,
        ])
        .await?;
        self.pushed(reference).await
    }

    /// Pushes one image per platform (tagged `<tag>-<os>-<arch>[-<variant>]`) and an OCI index of
    /// them as `<repository>:<tag>`.
    pub async fn push_multi_platform(
        &self,
        repository: &str,
        tag: &str,
        platforms: &[&str],
    ) -> Result<PushedImage> {
        let reference = self.reference(&format!("{repository}:{tag}"));
        let mut args = vec!["index".to_owned(), "append".to_owned()];
        for platform in platforms {
            let image = self
                .push_image(repository, &platform_tag(tag, platform), platform)
                .await?;
            args.extend(["-m".to_owned(), image.by_digest()]);
        }
        args.extend(["-t".to_owned(), reference.clone()]);
        self.crane(args).await?;
        self.pushed(reference).await
    }

    /// Like [`Registry::push_multi_platform`], plus an attestation-like entry as BuildKit writes
    /// it: a manifest with platform `unknown/unknown` and the `vnd.docker.reference.*` annotations
    /// pointing at the first image. No node can run it, so a reader must skip it.
    pub async fn push_index_with_attestation(
        &self,
        repository: &str,
        tag: &str,
        platforms: &[&str],
    ) -> Result<PushedImage> {
        let mut manifests = Vec::new();
        for platform in platforms {
            let image = self
                .push_image(repository, &platform_tag(tag, platform), platform)
                .await?;
            manifests.push(index_entry(
                self.descriptor(&image.by_digest()).await?,
                platform,
                None,
            ));
        }
        let first = manifests
            .first()
            .and_then(|m| m["digest"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| Error::Format {
                action: "build an index with an attestation".into(),
                message: "no platforms given".into(),
            })?;
        let attestation = self
            .push_image(repository, &format!("{tag}-attestation"), "unknown/unknown")
            .await?;
        manifests.push(index_entry(
            self.descriptor(&attestation.by_digest()).await?,
            "unknown/unknown",
            Some(&first),
        ));
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": manifests,
        })
        .to_string();
        let reference = self.reference(&format!("{repository}:{tag}"));
        self.client(
            Tool::Regctl,
            ["manifest", "put", "--content-type", OCI_INDEX, &reference],
        )?
        .input(index.as_bytes())
        .run()
        .await?;
        self.pushed(reference).await
    }

    /// The descriptor of the manifest `reference` names, from its exact bytes.
    pub async fn descriptor(&self, reference: &str) -> Result<Descriptor> {
        let manifest = self.crane(["manifest", reference]).await?;
        let media_type = serde_json::from_str::<serde_json::Value>(&manifest)
            .ok()
            .and_then(|m| m["mediaType"].as_str().map(str::to_owned))
            .ok_or_else(|| Error::Format {
                action: format!("read the manifest of {reference}"),
                message: "no mediaType".into(),
            })?;
        Ok(Descriptor {
            media_type,
            digest: sha256_digest(manifest.as_bytes()),
            size: manifest.len() as u64,
        })
    }

    async fn pushed(&self, reference: String) -> Result<PushedImage> {
        let digest = self.crane(["digest", &reference]).await?.trim().to_owned();
        Ok(PushedImage { reference, digest })
    }

    /// A one-file tar layer naming the platform, so each platform's image has its own content.
    fn layer(&self, platform: &str) -> Result<PathBuf> {
        let path = self
            .workdir
            .join(&format!("layer-{}.tar", platform.replace('/', "-")));
        tar_with_file("platform", platform.as_bytes())
            .and_then(|archive| std::fs::write(&path, archive))
            .map_err(io("write", &path))?;
        Ok(path)
    }
}

/// `sha256:<hex>` of `bytes`.
fn sha256_digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// `<tag>-<os>-<arch>[-<variant>]`.
fn platform_tag(tag: &str, platform: &str) -> String {
    format!("{tag}-{}", platform.replace('/', "-"))
}

fn index_entry(descriptor: Descriptor, platform: &str, attests: Option<&str>) -> serde_json::Value {
    let mut parts = platform.split('/');
    let mut entry = serde_json::json!({
        "mediaType": descriptor.media_type,
        "digest": descriptor.digest,
        "size": descriptor.size,
        "platform": {
            "os": parts.next().unwrap_or_default(),
            "architecture": parts.next().unwrap_or_default(),
        },
    });
    if let Some(variant) = parts.next() {
        entry["platform"]["variant"] = variant.into();
    }
    if let Some(digest) = attests {
        entry["annotations"] = serde_json::json!({
            "vnd.docker.reference.digest": digest,
            "vnd.docker.reference.type": "attestation-manifest",
        });
    }
    entry
}

/// A tar archive holding one regular file.
fn tar_with_file(name: &str, content: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut header = tar::Header::new_ustar();
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    let mut archive = tar::Builder::new(Vec::new());
    archive.append_data(&mut header, name, content)?;
    archive.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_digest_replaces_the_tag_and_keeps_the_port() {
        let image = PushedImage {
            reference: "127.0.0.1:5000/team/app:v1".into(),
            digest: "sha256:abc".into(),
        };
        assert_eq!(image.by_digest(), "127.0.0.1:5000/team/app@sha256:abc");
        let untagged = PushedImage {
            reference: "127.0.0.1:5000/team/app".into(),
            digest: "sha256:abc".into(),
        };
        assert_eq!(untagged.by_digest(), "127.0.0.1:5000/team/app@sha256:abc");
    }

    #[test]
    fn attestation_entry_is_unknown_unknown_and_points_at_the_image() {
        let descriptor = Descriptor {
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            digest: "sha256:att".into(),
            size: 10,
        };
        let entry = index_entry(descriptor, "unknown/unknown", Some("sha256:img"));
        assert_eq!(entry["platform"]["os"], "unknown");
        assert_eq!(entry["platform"]["architecture"], "unknown");
        assert_eq!(
            entry["annotations"]["vnd.docker.reference.digest"],
            "sha256:img"
        );
    }

    #[test]
    fn digest_is_sha256_in_hex() {
        assert_eq!(
            sha256_digest(b"{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn platform_variant_is_kept() {
        let descriptor = Descriptor {
            media_type: "m".into(),
            digest: "d".into(),
            size: 1,
        };
        let entry = index_entry(descriptor, "linux/arm/v7", None);
        assert_eq!(entry["platform"]["variant"], "v7");
        assert_eq!(platform_tag("v1", "linux/arm/v7"), "v1-linux-arm-v7");
    }

    #[test]
    fn tar_holds_the_file() {
        let archive = tar_with_file("platform", b"linux/amd64").unwrap();
        let mut reader = tar::Archive::new(archive.as_slice());
        let mut entry = reader.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_str(), Some("platform"));
        let mut content = String::new();
        std::io::Read::read_to_string(&mut entry, &mut content).unwrap();
        assert_eq!(content, "linux/amd64");
    }
}
