//! Artifacts in the test registry: pushed with the ORAS Python SDK (optionally with an artifact
//! type and a subject), or attached NFD-style with `regctl artifact put --subject`; and the exact
//! descriptor of any manifest, as a subject or an index entry names it.

use std::ffi::OsString;
use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Registry;
use crate::command::Invocation;
use crate::error::{Error, Result};
use crate::tools::Tool;

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

/// Pulls into a directory with the SDK, as `oras-py` users pull; prints each path it wrote.
const ORAS_PULL: &str = r#"
import json, sys
import oras.client
request = json.loads(sys.argv[1])
client = oras.client.OrasClient(hostname=request["registry"], insecure=True, auth_backend="basic")
for path in client.pull(target=request["target"], outdir=request["outdir"]):
    print(path)
"#;

/// The ORAS Python SDK's pull of `target` (`HOST/<repository>:<tag>`) from the registry at `host`
/// into `outdir` (created), run there; it prints each path it wrote. Credentials, when the registry
/// wants them, go in the command's `ORAS_USER` and `ORAS_PASS`.
pub fn oras_sdk_pull(host: &str, target: &str, outdir: &Path) -> Result<std::process::Command> {
    let python = crate::tools::Tools::locate()?.path(Tool::OrasPython)?;
    std::fs::create_dir_all(outdir).map_err(crate::error::io("create", outdir))?;
    let request = serde_json::json!({"registry": host, "target": target, "outdir": outdir});
    let mut command = std::process::Command::new(python);
    command
        .current_dir(outdir)
        .args(["-c", ORAS_PULL, &request.to_string()]);
    Ok(command)
}

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
        output
            .lines()
            .last()
            .map(str::trim)
            .filter(|digest| digest.starts_with("sha256:"))
            .map(str::to_owned)
            .ok_or_else(|| Error::Format {
                action: format!("push {} with the ORAS SDK", artifact.reference),
                message: format!("no manifest digest in its output: {output:?}"),
            })
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
}

/// `sha256:<hex>` of `bytes`, as OCI digests are written.
pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_sha256_in_hex() {
        assert_eq!(
            sha256_digest(b"{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
