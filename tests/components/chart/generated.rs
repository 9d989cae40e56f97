//! Files generated from the chart and kept in sync by tests: `config/install.yaml` (the chart
//! rendered with its defaults, without its uninstall hook) and the chart README's values table (from the `# --` comments of
//! `values.yaml`). With `OCIFIT_REGENERATE=1` the tests rewrite them instead of failing.

use serde_json::Value;

/// The variable that makes the sync tests rewrite the files.
pub const REGENERATE: &str = "OCIFIT_REGENERATE";
/// How to regenerate, for the tests' failure messages.
pub const HOW: &str = "regenerate with: OCIFIT_REGENERATE=1 cargo test --test components generated";

pub const VALUES_TABLE_START: &str =
    "<!-- values table: generated from charts/ocifit/values.yaml -->";
pub const VALUES_TABLE_END: &str = "<!-- end of values table -->";

/// The header of `config/install.yaml`.
pub const INSTALL_HEADER: &str = "# Generated from charts/ocifit with its default values (release ocifit, namespace\n\
# ocifit-system); do not edit. Regenerate with: OCIFIT_REGENERATE=1 cargo test --test components generated\n";

/// Whether the tests should rewrite generated files.
pub fn regenerating() -> bool {
    std::env::var_os(REGENERATE).is_some_and(|v| v == "1")
}

/// The chart README's values table: one row per key documented with `# -- ` in `values_yaml` (the
/// comment and its `# ` continuation lines), with its default from the parsed values.
pub fn values_table(values_yaml: &str) -> String {
    let values: Value = serde_saphyr::from_str(values_yaml).expect("values.yaml is YAML");
    let mut rows = vec![
        "| Key | Default | Description |".to_owned(),
        "|---|---|---|".to_owned(),
    ];
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    for line in values_yaml.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(text) = trimmed.strip_prefix("# -- ") {
            doc = vec![text.to_owned()];
            continue;
        }
        if let Some(text) = trimmed.strip_prefix("# ").filter(|_| !doc.is_empty()) {
            doc.push(text.to_owned());
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("- ") {
            doc.clear();
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else {
            continue;
        };
        path.retain(|(i, _)| *i < indent);
        path.push((indent, key.to_owned()));
        if doc.is_empty() {
            continue;
        }
        let keys: Vec<&str> = path.iter().map(|(_, k)| k.as_str()).collect();
        let pointer: String = keys.iter().map(|k| format!("/{k}")).collect();
        let default = values
            .pointer(&pointer)
            .map(Value::to_string)
            .unwrap_or_default();
        rows.push(format!(
            "| `{}` | `{}` | {} |",
            keys.join("."),
            default,
            doc.join(" ").replace('|', "\\|")
        ));
        doc.clear();
    }
    rows.join("\n") + "\n"
}

/// `text` with what lies between the two markers replaced by `table`; None without the markers.
pub fn replace_between_markers(text: &str, table: &str) -> Option<String> {
    let start = text.find(VALUES_TABLE_START)? + VALUES_TABLE_START.len();
    let end = text[start..].find(VALUES_TABLE_END)? + start;
    Some(format!("{}\n{}{}", &text[..start], table, &text[end..]))
}
