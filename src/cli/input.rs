//! Reading the files `ocifit resolve` takes: Kubernetes objects exactly as `kubectl get … -o json`
//! or `-o yaml` prints them (a `List`, a typed list such as `NodeList`, or one object).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A file given to `ocifit resolve` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum InputError {
    /// The file cannot be read.
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is neither JSON nor YAML.
    #[error("{path} is not valid JSON or YAML: {message}")]
    Syntax { path: PathBuf, message: String },
    /// The file holds objects of another kind than expected.
    #[error("{path} holds a {found}, expected {expected}")]
    WrongKind {
        path: PathBuf,
        found: String,
        expected: String,
    },
    /// An object in the file does not have the shape of its kind.
    #[error("{path}: item {index} is not a valid {kind}: {source}")]
    Item {
        path: PathBuf,
        index: usize,
        kind: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Reads the whole file.
pub(super) fn read_file(path: &Path) -> Result<Vec<u8>, InputError> {
    std::fs::read(path).map_err(|source| InputError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Reads objects of `kind` from a file holding one such object, a `List` of them or a `<kind>List`,
/// in JSON or YAML.
pub(super) fn read_objects<T: DeserializeOwned>(
    path: &Path,
    kind: &str,
) -> Result<Vec<T>, InputError> {
    let bytes = read_file(path)?;
    let document = parse_document(path, &bytes)?;
    let list_kind = format!("{kind}List");
    let found = document
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("document without a kind")
        .to_owned();
    let items = if found == kind {
        vec![document]
    } else if found == "List" || found == list_kind {
        match document.get("items") {
            Some(serde_json::Value::Array(items)) => items.clone(),
            Some(serde_json::Value::Null) | None => Vec::new(),
            Some(_) => {
                return Err(InputError::Syntax {
                    path: path.to_owned(),
                    message: "`items` is not a list".into(),
                });
            }
        }
    } else {
        return Err(InputError::WrongKind {
            path: path.to_owned(),
            found,
            expected: format!("{kind}, {list_kind} or List"),
        });
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            // A `List` may mix kinds; each item must be the expected one.
            if let Some(item_kind) = item.get("kind").and_then(serde_json::Value::as_str)
                && item_kind != kind
            {
                return Err(InputError::WrongKind {
                    path: path.to_owned(),
                    found: format!("{item_kind} at item {index}"),
                    expected: kind.to_owned(),
                });
            }
            serde_json::from_value(item).map_err(|source| InputError::Item {
                path: path.to_owned(),
                index,
                kind: kind.to_owned(),
                source,
            })
        })
        .collect()
}

/// Parses JSON when the document starts like JSON (for its precise errors), YAML otherwise.
fn parse_document(path: &Path, bytes: &[u8]) -> Result<serde_json::Value, InputError> {
    let syntax = |message: String| InputError::Syntax {
        path: path.to_owned(),
        message,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| syntax(format!("not UTF-8 text: {e}")))?;
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| syntax(e.to_string()))
    } else {
        serde_saphyr::from_str(text).map_err(|e| syntax(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;

    use super::*;

    fn write(contents: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), contents).unwrap();
        file
    }

    #[test]
    fn kubectl_json_list_of_nodes_is_read() {
        let file = write(
            r#"{"apiVersion":"v1","kind":"List","items":[
                {"apiVersion":"v1","kind":"Node","metadata":{"name":"a","labels":{"x":"1"}}},
                {"apiVersion":"v1","kind":"Node","metadata":{"name":"b"}}],
               "metadata":{"resourceVersion":""}}"#,
        );
        let nodes: Vec<Node> = read_objects(file.path(), "Node").unwrap();
        let names: Vec<_> = nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn kubectl_yaml_single_node_is_read() {
        let file = write(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-1\n  labels:\n    kubernetes.io/arch: arm64\n",
        );
        let nodes: Vec<Node> = read_objects(file.path(), "Node").unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(
            nodes[0].metadata.labels.as_ref().unwrap()["kubernetes.io/arch"],
            "arm64"
        );
    }

    #[test]
    fn typed_node_list_is_read() {
        let file = write(r#"{"kind":"NodeList","items":[{"metadata":{"name":"a"}}]}"#);
        let nodes: Vec<Node> = read_objects(file.path(), "Node").unwrap();
        assert_eq!(nodes.len(), 1);
    }

    #[test]
    fn a_pod_list_given_as_nodes_names_the_kind_found() {
        let file = write(r#"{"kind":"PodList","items":[]}"#);
        let err = read_objects::<Node>(file.path(), "Node").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("holds a PodList"), "{message}");
        assert!(
            message.contains(&file.path().display().to_string()),
            "{message}"
        );
    }

    #[test]
    fn a_list_mixing_kinds_names_the_item() {
        let file = write(
            r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"a"}},{"kind":"Pod","metadata":{"name":"p"}}]}"#,
        );
        let err = read_objects::<Node>(file.path(), "Node").unwrap_err();
        assert!(err.to_string().contains("Pod at item 1"), "{err}");
    }

    #[test]
    fn broken_json_is_a_syntax_error_naming_the_file() {
        let file = write(r#"{"kind": "List", "items": [}"#);
        let err = read_objects::<Node>(file.path(), "Node").unwrap_err();
        assert!(matches!(err, InputError::Syntax { .. }), "{err}");
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let err = read_objects::<Node>(Path::new("/nonexistent/nodes.json"), "Node").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to read /nonexistent/nodes.json"),
            "{err}"
        );
    }
}
