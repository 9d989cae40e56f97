//! Applies CustomResourceDefinition YAML files (e.g. the repository's `crds/`) by server-side apply
//! and waits until each is Established, so a test can create its custom resources at once. A CRD the
//! apiserver rejects (a non-structural schema, bad CEL) fails here with the apiserver's message.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};

use crate::error::{Error, Result, io, kube as kube_error};

/// The field manager of the kit's applies.
const FIELD_MANAGER: &str = "ocifit-testkit";
/// How long a CRD may take to become Established.
const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);

/// Applies every `.yaml`/`.yml` file in `dir` (in name order); the names of the CRDs.
pub async fn apply_crd_dir(client: &Client, dir: &Path) -> Result<Vec<String>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io("read directory", dir))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    apply_crd_files(client, &files).await
}

/// Applies the CRDs in `files` (each may hold several YAML documents) and waits until every one is
/// Established; their names.
pub async fn apply_crd_files(client: &Client, files: &[PathBuf]) -> Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for file in files {
        for crd in read_crds(file)? {
            let name = crd.metadata.name.clone().unwrap_or_default();
            api.patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&crd),
            )
            .await
            .map_err(kube_error(format!(
                "apply CRD {name} from {}",
                file.display()
            )))?;
            names.push(name);
        }
    }
    for name in &names {
        let established = await_condition(api.clone(), name, conditions::is_crd_established());
        tokio::time::timeout(ESTABLISHED_TIMEOUT, established)
            .await
            .map_err(|_| Error::Timeout {
                what: format!("CRD {name} to be Established"),
                timeout: ESTABLISHED_TIMEOUT,
                log_tails: String::new(),
            })?
            .map_err(|e| Error::Format {
                action: format!("watch CRD {name}"),
                message: e.to_string(),
            })?;
    }
    Ok(names)
}

fn read_crds(file: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let text = std::fs::read_to_string(file).map_err(io("read", file))?;
    serde_saphyr::from_multiple(&text).map_err(|e| Error::Format {
        action: format!("read CRDs from {}", file.display()),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_crds_in_one_file_are_read_and_a_broken_file_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("two.yaml");
        let crd = |name: &str| {
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}\nspec:\n  group: g\n  names: {{kind: K, plural: ks}}\n  scope: Cluster\n  versions: []\n"
            )
        };
        std::fs::write(&good, format!("{}---\n{}", crd("a.g"), crd("b.g"))).unwrap();
        let names: Vec<_> = read_crds(&good)
            .unwrap()
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect();
        assert_eq!(names, ["a.g", "b.g"]);

        let broken = dir.path().join("broken.yaml");
        std::fs::write(&broken, "kind: [").unwrap();
        let message = read_crds(&broken).unwrap_err().to_string();
        assert!(message.contains("broken.yaml"), "{message}");
    }
}
