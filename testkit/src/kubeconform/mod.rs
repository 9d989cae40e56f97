//! Offline manifest validation with kubeconform: a directory of JSON schemas in kubeconform's layout,
//! written from the test apiserver's own OpenAPI (`/openapi/v3`) and from CRD files, and
//! `kubeconform -strict` run against it alone, so no schema is ever fetched from the network. The
//! conversion is pure (`convert`); this module only fetches, writes files and runs kubeconform.

mod convert;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use convert::{KindSchema, kinds_from_crd, kinds_from_openapi};

use crate::command::Invocation;
use crate::error::{Error, Result, io, kube as kube_error};
use crate::tools::{Tool, Tools};

/// kubeconform's schema location template for the files this module writes.
const LOCATION: &str = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json";

/// A directory of kubeconform schemas.
#[derive(Clone, Debug)]
pub struct KubeconformSchemas {
    dir: PathBuf,
}

impl KubeconformSchemas {
    /// An empty schema directory at `dir` (created).
    pub fn create(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
        Ok(Self { dir })
    }

    /// Writes a schema for every kind the apiserver serves (built-in and CRDs it has), from each
    /// group-version's OpenAPI v3 document; how many kinds.
    pub async fn add_from_apiserver(&self, client: &kube::Client) -> Result<usize> {
        let index = get_json(client, "/openapi/v3").await?;
        let urls: Vec<String> = index
            .get("paths")
            .and_then(Value::as_object)
            .map(|paths| {
                paths
                    .values()
                    .filter_map(|p| p.get("serverRelativeURL").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut count = 0;
        for url in urls {
            let document = get_json(client, &url).await?;
            count += self.write(&kinds_from_openapi(&document))?;
        }
        Ok(count)
    }

    /// Writes a schema for every served version of the CRDs in `file` (YAML, one or more
    /// documents); how many kinds.
    pub fn add_crd_file(&self, file: &Path) -> Result<usize> {
        let text = std::fs::read_to_string(file).map_err(io("read", file))?;
        let crds: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| Error::Format {
            action: format!("read CRDs from {}", file.display()),
            message: e.to_string(),
        })?;
        let kinds: Vec<KindSchema> = crds.iter().flat_map(kinds_from_crd).collect();
        self.write(&kinds)
    }

    /// The `-schema-location` argument that finds these files.
    pub fn location(&self) -> String {
        format!("{}/{LOCATION}", self.dir.display())
    }

    /// Runs `kubeconform -strict -summary` on `manifests` (multi-document YAML) against these
    /// schemas only; its report, or an error carrying it (a kind without a schema is an error too).
    pub async fn validate(&self, tools: &Tools, manifests: &str) -> Result<String> {
        let kubeconform = tools.path(Tool::Kubeconform)?;
        Invocation::new(kubeconform)
            .args([
                "-strict",
                "-summary",
                "-output",
                "text",
                "-schema-location",
                &self.location(),
                "-",
            ])
            .input(manifests.as_bytes())
            .run()
            .await
    }

    fn write(&self, kinds: &[KindSchema]) -> Result<usize> {
        for kind in kinds {
            let path = self.dir.join(kind.relative_path());
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io("create directory", parent))?;
            }
            let text = serde_json::to_string(&kind.schema).map_err(|e| Error::Format {
                action: format!("write the schema of {}", kind.kind),
                message: e.to_string(),
            })?;
            std::fs::write(&path, text).map_err(io("write", &path))?;
        }
        Ok(kinds.len())
    }
}

async fn get_json(client: &kube::Client, url: &str) -> Result<Value> {
    let request = http::Request::get(url)
        .body(Vec::new())
        .map_err(|e| Error::Format {
            action: format!("build a request for {url}"),
            message: e.to_string(),
        })?;
    let text = client
        .request_text(request)
        .await
        .map_err(kube_error(format!("get {url}")))?;
    serde_json::from_str(&text).map_err(|e| Error::Format {
        action: format!("read {url} as JSON"),
        message: e.to_string(),
    })
}
