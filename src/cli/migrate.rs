//! `ocifit migrate`: reads what users of the seeds wrote (an oras-operator `OrasCache`,
//! kube-arch-webhook's Helm values, archaware-controller's install manifests with the cluster's
//! Pods and DaemonSets, ocifit-k8s's install) and prints the ocifit objects and chart values that
//! do the same. Each input says in `#` comments what was carried over, and names every setting
//! that was not with why, never dropping one silently. The translation is pure ([`translate`]);
//! only [`run`] reads and writes.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value};

mod arch_webhook;
mod archaware;
mod ocifit_k8s;
mod oras;
mod stranded;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_seeds;

/// `ocifit migrate`'s arguments.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Files holding the seeds' manifests or values (YAML or JSON, several documents each); `-`
    /// or none reads standard input.
    pub files: Vec<PathBuf>,
    /// Write the ocifit chart values (for `helm install -f FILE`) here. Without it they are not
    /// written, and a note on standard error says there are some.
    #[arg(long, value_name = "FILE")]
    pub values: Option<PathBuf>,
}

/// One input document: where it came from and what it holds.
#[derive(Debug, Clone)]
pub(super) struct Document {
    /// `FILE#N` (N counts from 1), for the notes.
    pub source: String,
    pub value: Value,
}

/// One piece of output: an object to apply (or nothing), and the notes about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Output {
    /// What could not be carried over, and why; one line each.
    pub notes: Vec<String>,
    /// The object, when there is one.
    pub object: Option<Value>,
}

impl Output {
    /// The PlacementPolicy `name` with `spec`, and the notes about it.
    pub(super) fn placement_policy(name: &str, spec: Value, notes: Vec<String>) -> Output {
        Output {
            notes,
            object: Some(serde_json::json!({
                "apiVersion": "ocifit.io/v1alpha1",
                "kind": "PlacementPolicy",
                "metadata": {"name": name},
                "spec": spec,
            })),
        }
    }
}

/// What the seeds' documents become.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Migration {
    /// Objects to apply, each with its notes; notes without an object come first in the output.
    pub objects: Vec<Output>,
    /// Chart values (an object), and notes about them.
    pub values: Output,
}

impl Migration {
    /// Sets the chart value at `path` (dotted), keeping every other value.
    pub(crate) fn set_value(&mut self, path: &str, value: Value) {
        let patch = path.rsplit('.').fold(value, |inner, key| {
            Value::Object(Map::from_iter([(key.to_owned(), inner)]))
        });
        merge(self.values.object.get_or_insert(Value::Null), patch);
    }

    /// Appends `entry` to the chart's list value at `path` (`defaults` when it is not set yet),
    /// keeping each entry once.
    pub(crate) fn push_value(&mut self, path: &str, defaults: &[&str], entry: &str) {
        let pointer = format!("/{}", path.replace('.', "/"));
        let mut list: Vec<String> = match self
            .values
            .object
            .as_ref()
            .and_then(|values| values.pointer(&pointer))
            .and_then(Value::as_array)
        {
            Some(items) => items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect(),
            None => defaults.iter().map(|d| (*d).to_owned()).collect(),
        };
        if !list.iter().any(|e| e == entry) {
            list.push(entry.to_owned());
        }
        self.set_value(path, Value::from(list));
    }
}

/// JSON merge: objects merge key by key, anything else replaces.
fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

/// What the documents become: each recognised by its kind (or, for Helm values, its keys). The
/// cluster's Pods and DaemonSets, given beside archaware-controller's Deployment, are read to
/// name the system pods its migration would strand.
pub(super) fn translate(documents: &[Document]) -> Migration {
    let mut migration = Migration::default();
    let documents = flatten(documents);
    let with_archaware = documents.iter().any(|d| archaware::is_controller(&d.value));
    let given = documents
        .iter()
        .any(|d| stranded::is_cluster_object(&d.value));
    let workloads = (with_archaware && given).then(|| {
        stranded::workloads(
            documents
                .iter()
                .map(|d| &d.value)
                .filter(|v| stranded::is_cluster_object(v)),
        )
    });
    let ocifit_k8s_files: Vec<&str> = documents
        .iter()
        .filter(|d| ocifit_k8s::is_ocifit_k8s(&d.value, false))
        .map(|d| file_of(&d.source))
        .collect();
    for document in &documents {
        let value = &document.value;
        let source = document.source.as_str();
        let kind = value.get("kind").and_then(Value::as_str);
        let api_version = value.get("apiVersion").and_then(Value::as_str);
        if kind == Some("OrasCache")
            && api_version.is_some_and(|v| v.starts_with(oras::GROUP_PREFIX))
        {
            oras::translate(source, value, &mut migration);
        } else if with_archaware && stranded::is_cluster_object(value) {
            // Read above, as the cluster's workloads.
        } else if archaware::is_archaware(value) {
            archaware::translate(source, value, workloads.as_deref(), &mut migration);
        } else if ocifit_k8s::is_ocifit_k8s(value, ocifit_k8s_files.contains(&file_of(source))) {
            ocifit_k8s::translate(source, value, &mut migration);
        } else if kind.is_none() && arch_webhook::is_values(value) {
            arch_webhook::translate(source, value, &mut migration);
        } else {
            let also = if stranded::is_cluster_object(value) {
                " (Pods and DaemonSets are read only beside archaware-controller's Deployment, to \
                 name the system pods its migration would strand)"
            } else {
                ""
            };
            migration.objects.push(Output {
                notes: vec![format!(
                    "{source}: {} is none of the seeds' objects or values: left out{also}",
                    describe(value)
                )],
                object: None,
            });
        }
    }
    let counted = workloads.as_ref().map_or(0, Vec::len);
    if counted > 0 {
        migration.objects.insert(
            0,
            Output {
                notes: vec![format!(
                    "the cluster's DaemonSets and kube-system pods given ({counted}) are read to \
                     name what archaware-controller's migration would strand; nothing is made \
                     of them"
                )],
                object: None,
            },
        );
    }
    migration
}

/// The file part of a document's source (`FILE#N`, `FILE#N item M`).
fn file_of(source: &str) -> &str {
    source.rsplit_once('#').map_or(source, |(file, _)| file)
}

/// The documents with each `List` (`kubectl get … -o yaml`) replaced by its items.
fn flatten(documents: &[Document]) -> Vec<Document> {
    let mut out = Vec::new();
    for document in documents {
        let is_list = document
            .value
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|kind| kind.ends_with("List"));
        match document.value.get("items").and_then(Value::as_array) {
            Some(items) if is_list => {
                out.extend(items.iter().enumerate().map(|(index, item)| Document {
                    source: format!("{} item {}", document.source, index + 1),
                    value: item.clone(),
                }));
            }
            _ => out.push(document.clone()),
        }
    }
    out
}

/// `kind namespace/name` of an object, for notes.
pub(crate) fn describe(value: &Value) -> String {
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    match (text("/kind"), text("/metadata/name")) {
        (Some(kind), Some(name)) => match text("/metadata/namespace") {
            Some(namespace) => format!("{kind} {namespace}/{name}"),
            None => format!("{kind} {name}"),
        },
        (Some(kind), None) => format!("a {kind} without a name"),
        (None, _) => "a document without a kind".to_owned(),
    }
}

/// The objects as one YAML stream for `kubectl apply -f -`: first the notes that belong to no
/// object, then each object preceded by its notes.
pub(super) fn render_objects(migration: &Migration) -> Result<String, MigrateError> {
    let mut out = String::from(
        "# Generated by `ocifit migrate`. Lines starting with # are notes: what changes, and what was not carried over and why.\n",
    );
    for output in migration.objects.iter().filter(|o| o.object.is_none()) {
        out.push_str(&comments(&output.notes));
    }
    for output in &migration.objects {
        let Some(object) = &output.object else {
            continue;
        };
        out.push_str("---\n");
        out.push_str(&comments(&output.notes));
        out.push_str(&serde_saphyr::to_string(object).map_err(MigrateError::Render)?);
    }
    Ok(out)
}

/// The chart values as a YAML document, its notes first; `None` when there are neither.
pub(super) fn render_values(migration: &Migration) -> Result<Option<String>, MigrateError> {
    let values = &migration.values;
    if values.notes.is_empty() && values.object.is_none() {
        return Ok(None);
    }
    let mut out = String::from("# ocifit chart values, generated by `ocifit migrate`.\n");
    out.push_str(&comments(&values.notes));
    match &values.object {
        Some(object) => {
            out.push_str(&serde_saphyr::to_string(object).map_err(MigrateError::Render)?)
        }
        None => out.push_str("{}\n"),
    }
    Ok(Some(out))
}

fn comments(notes: &[String]) -> String {
    notes
        .iter()
        .flat_map(|note| note.lines())
        .map(|line| format!("# {line}\n"))
        .collect()
}

/// Why `ocifit migrate` printed nothing.
#[derive(Debug, thiserror::Error)]
pub(super) enum MigrateError {
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid YAML or JSON: {message}")]
    Syntax { path: String, message: String },
    #[error("failed to render YAML")]
    Render(#[source] serde_saphyr::SerializeError),
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Splits a file's text into its documents (YAML streams; JSON is YAML).
pub(super) fn parse(name: &str, text: &str) -> Result<Vec<Document>, MigrateError> {
    let values: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| MigrateError::Syntax {
            path: name.to_owned(),
            message: e.to_string(),
        })?;
    Ok(values
        .into_iter()
        .enumerate()
        .filter(|(_, value)| !value.is_null())
        .map(|(index, value)| Document {
            source: format!("{name}#{}", index + 1),
            value,
        })
        .collect())
}

fn read_input(path: &Path) -> Result<(String, String), MigrateError> {
    let read_error = |source| MigrateError::Read {
        path: path.to_owned(),
        source,
    };
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(read_error)?;
        return Ok(("stdin".to_owned(), text));
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    Ok((path.display().to_string(), text))
}

fn migrate(args: &MigrateArgs) -> Result<(String, Option<String>), MigrateError> {
    let stdin = [PathBuf::from("-")];
    let files = if args.files.is_empty() {
        &stdin[..]
    } else {
        &args.files[..]
    };
    let mut documents = Vec::new();
    for path in files {
        let (name, text) = read_input(path)?;
        documents.extend(parse(&name, &text)?);
    }
    let migration = translate(&documents);
    Ok((render_objects(&migration)?, render_values(&migration)?))
}

/// Runs the command: exit 0 when everything was read and printed, 2 when an input cannot be used.
pub(super) fn run(args: &MigrateArgs) -> ExitCode {
    let (objects, values) = match migrate(args) {
        Ok(output) => output,
        Err(err) => {
            eprintln!("error: {}", crate::telemetry::error_chain(&err));
            return ExitCode::from(2);
        }
    };
    if let (Some(values), Some(path)) = (&values, &args.values)
        && let Err(source) = std::fs::write(path, values)
    {
        let err = MigrateError::Write {
            path: path.clone(),
            source,
        };
        eprintln!("error: {}", crate::telemetry::error_chain(&err));
        return ExitCode::from(2);
    }
    if values.is_some() && args.values.is_none() {
        eprintln!(
            "note: the inputs also set ocifit chart values; pass --values FILE to write them"
        );
    }
    // A closed stdout (e.g. `| head`) is not worth a panic.
    let _ = std::io::stdout().write_all(objects.as_bytes());
    ExitCode::SUCCESS
}
