//! Small images in the test registry, pushed with crane: single-platform images, multi-platform
//! indexes, an index with an attestation-like `unknown/unknown` entry (put with regctl, since
//! crane cannot write descriptor annotations), and images assembled by [`crate::image`] — alone, or
//! as this machine's entry of a multi-platform index whose other entries are small stand-ins.

use std::ffi::OsString;
use std::path::PathBuf;

use super::Registry;
use super::artifacts::Descriptor;
use crate::error::{Error, Result, io};
use crate::image::{ImageBuilder, machine_architecture};
use crate::tools::Tool;

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

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

impl Registry {
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

    /// Assembles `image` and pushes it as `<repository>:<tag>` with `crane push`.
    pub async fn push_built(
        &self,
        image: &ImageBuilder,
        repository: &str,
        tag: &str,
    ) -> Result<PushedImage> {
        let reference = self.reference(&format!("{repository}:{tag}"));
        let dir = self
            .workdir
            .join(&format!("layout-{}-{tag}", repository.replace('/', "-")));
        let _ = std::fs::remove_dir_all(&dir);
        let layout = image.write_layout(&dir, &reference)?;
        let pushed = self
            .crane([
                OsString::from("push"),
                layout.dir.into_os_string(),
                reference.clone().into(),
            ])
            .await;
        // Pushed, its bytes are in the registry: one copy of ocifit's image per test is enough disk.
        let _ = std::fs::remove_dir_all(&dir);
        pushed?;
        self.pushed(reference).await
    }

    /// An OCI index as `<repository>:<tag>` whose entry for this machine's platform is `image`
    /// (it runs on the real node) and whose entries for the other `platforms` are the small images
    /// of [`Registry::push_image`] (nothing here can run them).
    pub async fn push_runnable_multi_platform(
        &self,
        image: &ImageBuilder,
        repository: &str,
        tag: &str,
        platforms: &[&str],
    ) -> Result<PushedImage> {
        let native = format!("linux/{}", machine_architecture());
        let reference = self.reference(&format!("{repository}:{tag}"));
        let mut args = vec!["index".to_owned(), "append".to_owned()];
        for platform in platforms {
            let tag = platform_tag(tag, platform);
            let pushed = if *platform == native {
                self.push_built(image, repository, &tag).await?
            } else {
                self.push_image(repository, &tag, platform).await?
            };
            args.extend(["-m".to_owned(), pushed.by_digest()]);
        }
        args.extend(["-t".to_owned(), reference.clone()]);
        self.crane(args).await?;
        self.pushed(reference).await
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
