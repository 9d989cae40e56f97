//! The step contract read from annotations: values are checked, defaults are the oras-operator's,
//! the settings that only made sense for its scripts are reported as ignored, and a key under the
//! prefix that is no setting (a misspelt one) is reported for a warning and otherwise skipped, as
//! the oras-operator skips it: workflows it ran keep running.

use std::collections::BTreeMap;

use crate::api::step;

use super::Denial;

/// Where a step's URIs live: the namespace's ArtifactCache, or a registry named on the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The ArtifactCache of this name, in the step's namespace.
    Cache(String),
    /// `host[:port]`, over plain HTTP when the annotation said `http://`.
    Registry { host: String, plain_http: bool },
}

/// What a step's annotations ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSettings {
    pub source: Source,
    /// `repository:tag` of each input, in order: `input-uri`, then `input-uri_<suffix>` with
    /// numeric suffixes by number, then the other suffixes by name.
    pub inputs: Vec<String>,
    pub input_path: Option<String>,
    pub output_uri: Option<String>,
    pub output_path: Option<String>,
    pub output_pipe: Option<String>,
    pub unpack: bool,
    /// The Secret with `ORAS_USER`, `ORAS_PULL_PASS`, `ORAS_PUSH_PASS`.
    pub oras_env: Option<String>,
    pub container: Option<String>,
    pub debug: bool,
    /// Annotations accepted but without effect here, for the admission warning.
    pub ignored: Vec<String>,
    /// Keys under the prefix that are no setting, for the admission warning.
    pub unknown: Vec<String>,
}

/// Reads the contract from annotations: `None` when none is under the prefix.
pub fn parse(annotations: &BTreeMap<String, String>) -> Result<Option<StepSettings>, Denial> {
    let ours: Vec<(&str, &str)> = annotations
        .iter()
        .filter_map(|(key, value)| {
            key.strip_prefix(step::PREFIX)
                .map(|field| (field, value.as_str()))
        })
        .collect();
    if ours.is_empty() {
        return Ok(None);
    }
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    let mut inputs: Vec<(InputOrder, &str)> = Vec::new();
    let mut ignored = Vec::new();
    let mut unknown = Vec::new();
    for (field, value) in ours {
        // Written out only for what a warning or a denial names.
        let key = || format!("{}{field}", step::PREFIX);
        let known = input_order(field).is_some()
            || step::IGNORED.contains(&field)
            || KNOWN.contains(&field);
        if !known {
            unknown.push(key());
            continue;
        }
        if value.trim().is_empty() {
            return Err(Denial::EmptyAnnotation { key: key() });
        }
        if let Some(order) = input_order(field) {
            inputs.push((order, value.trim()));
        } else if step::IGNORED.contains(&field) {
            ignored.push(key());
        } else {
            fields.insert(field, value.trim());
        }
    }
    inputs.sort();
    let flag = |field: &str, default: bool| -> Result<bool, Denial> {
        match fields.get(field) {
            None => Ok(default),
            Some(&"true") => Ok(true),
            Some(&"false") => Ok(false),
            Some(other) => Err(Denial::InvalidAnnotation {
                key: format!("{}{field}", step::PREFIX),
                value: (*other).to_string(),
                expected: "\"true\" or \"false\"",
            }),
        }
    };
    let text = |field: &str| fields.get(field).map(|v| (*v).to_string());
    let source = match fields.get(step::REGISTRY) {
        Some(registry) => registry_source(registry)?,
        None => {
            Source::Cache(text(step::ORAS_CACHE).unwrap_or_else(|| step::DEFAULT_CACHE.to_string()))
        }
    };
    for field in [step::INPUT_PATH, step::OUTPUT_PATH, step::OUTPUT_PIPE] {
        if fields.get(field).is_some_and(|v| v.contains('\0')) {
            return Err(Denial::InvalidAnnotation {
                key: format!("{}{field}", step::PREFIX),
                value: text(field).unwrap_or_default(),
                expected: "a path",
            });
        }
    }
    if let Some(name) = fields.get(step::ORAS_ENV) {
        check_name(
            step::ORAS_ENV,
            name,
            "the name of a Secret in the step's namespace",
        )?;
    }
    if let Some(name) = fields.get(step::ORAS_CACHE) {
        check_name(
            step::ORAS_CACHE,
            name,
            "the name of an ArtifactCache in the step's namespace",
        )?;
    }
    Ok(Some(StepSettings {
        source,
        inputs: inputs.into_iter().map(|(_, uri)| uri.to_string()).collect(),
        input_path: text(step::INPUT_PATH),
        output_uri: text(step::OUTPUT_URI),
        output_path: text(step::OUTPUT_PATH),
        output_pipe: text(step::OUTPUT_PIPE),
        unpack: flag(step::UNPACK, true)?,
        oras_env: text(step::ORAS_ENV),
        container: text(step::CONTAINER),
        debug: flag(step::DEBUG, false)?,
        ignored,
        unknown,
    }))
}

/// The settings with a value, besides the inputs and the ignored ones.
const KNOWN: [&str; 10] = [
    step::ORAS_CACHE,
    step::INPUT_PATH,
    step::OUTPUT_URI,
    step::OUTPUT_PATH,
    step::OUTPUT_PIPE,
    step::UNPACK,
    step::REGISTRY,
    step::ORAS_ENV,
    step::CONTAINER,
    step::DEBUG,
];

/// Inputs sort as `input-uri` first, then `input-uri_N` by number, then other suffixes by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum InputOrder {
    Plain,
    Numbered(u64),
    Named(String),
}

fn input_order(field: &str) -> Option<InputOrder> {
    if field == step::INPUT_URI {
        return Some(InputOrder::Plain);
    }
    let suffix = field.strip_prefix(step::INPUT_URI)?.strip_prefix('_')?;
    Some(match suffix.parse::<u64>() {
        Ok(n) => InputOrder::Numbered(n),
        Err(_) => InputOrder::Named(suffix.to_string()),
    })
}

fn registry_source(value: &str) -> Result<Source, Denial> {
    let (host, plain_http) = match value.split_once("://") {
        Some(("http", host)) => (host, true),
        Some(("https", host)) => (host, false),
        Some(_) => return Err(invalid_registry(value)),
        None => (value, false),
    };
    let host = host.trim_end_matches('/');
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
    if !valid {
        return Err(invalid_registry(value));
    }
    Ok(Source::Registry {
        host: host.to_string(),
        plain_http,
    })
}

fn invalid_registry(value: &str) -> Denial {
    Denial::InvalidAnnotation {
        key: format!("{}{}", step::PREFIX, step::REGISTRY),
        value: value.to_string(),
        expected: "host[:port], or http://host[:port] for plain HTTP",
    }
}

/// A Kubernetes object name (DNS subdomain).
fn check_name(field: &str, value: &str, expected: &'static str) -> Result<(), Denial> {
    let valid = value.len() <= 253
        && value.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if valid {
        Ok(())
    } else {
        Err(Denial::InvalidAnnotation {
            key: format!("{}{field}", step::PREFIX),
            value: value.to_string(),
            expected,
        })
    }
}
