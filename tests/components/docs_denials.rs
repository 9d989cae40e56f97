//! Every reason an admission answer can refuse with, listed where a user reads it: image
//! selection's `DenyReason` names in `docs/pod-contract.md`'s "Denial reasons", the step planner's
//! `Denial` names in `docs/artifact-cache.md`'s "Refusals". The names are read from the code's
//! name functions (the metric label and Event reason), so a variant added without its row, or a
//! row left after its variant went, fails here naming it.

use std::collections::BTreeSet;
use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The names `fn NAME` returns for `Enum::Variant … => "Name"` arms, read from its body (up to
/// the function's closing brace at its own indentation).
fn names_in_code(file: &str, function: &str, enum_name: &str) -> BTreeSet<String> {
    let source = read(file);
    let start = format!("pub fn {function}(");
    let mut lines = source.lines().skip_while(|line| !line.contains(&start));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("{file} has no {start}"));
    let end = format!("{}}}", &header[..header.len() - header.trim_start().len()]);
    let arm = format!("{enum_name}::");
    let names: BTreeSet<String> = lines
        .take_while(|line| *line != end)
        .filter(|line| line.trim_start().starts_with(&arm))
        .filter_map(|line| {
            let (_, name) = line.split_once("=> \"")?;
            Some(name.split('"').next()?.to_owned())
        })
        .collect();
    assert!(
        !names.is_empty(),
        "no {arm}… => \"…\" arm in {file}'s {start}"
    );
    names
}

/// The first column's names (`` `Name` ``) of the table in the section under `heading`.
fn names_in_docs(file: &str, heading: &str) -> BTreeSet<String> {
    let text = read(file);
    let section = text
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{file} has no {heading:?}"))
        .1;
    let names: BTreeSet<String> = section
        .lines()
        .take_while(|line| !line.starts_with('#'))
        .filter_map(|line| line.strip_prefix("| `")?.split('`').next())
        .map(str::to_owned)
        .collect();
    assert!(!names.is_empty(), "no table under {heading:?} in {file}");
    names
}

fn assert_listed(code: &BTreeSet<String>, docs: &BTreeSet<String>, doc: &str) {
    let missing: Vec<_> = code.difference(docs).collect();
    let stale: Vec<_> = docs.difference(code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "{doc}: reasons without a row {missing:?}; rows naming no reason {stale:?}"
    );
}

#[test]
fn every_image_selection_denial_is_in_the_pod_contract() {
    let code = names_in_code(
        "src/image_selection/planner/reasons.rs",
        "as_str",
        "DenyReason",
    );
    let docs = names_in_docs("docs/pod-contract.md", "### Denial reasons");
    assert_listed(&code, &docs, "docs/pod-contract.md");
}

#[test]
fn every_step_refusal_is_in_the_artifact_cache_docs() {
    let code = names_in_code("src/artifact_cache/planner/mod.rs", "name", "Denial");
    let docs = names_in_docs("docs/artifact-cache.md", "### Refusals");
    assert_listed(&code, &docs, "docs/artifact-cache.md");
}
