//! The code facts the documentation lists, read from the code: the admission routes and the
//! feature answering each, the CRDs, the controllers, and each CRD's condition types and reasons
//! (`docs/controller.md`'s reference tables), and the names `docs/architecture.md` draws. A route,
//! CRD, controller or condition added without its doc line, or a line left after its fact went,
//! fails here naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kube::CustomResourceExt;
use ocifit::api::PlacementReason;
use ocifit::api::{
    ArtifactCache, CacheReason, ConditionType, ImageSelectionPolicy, PlacementPolicy, Reason,
};

/// The features, as their rooms in `src/` are named; a feature is written in the docs with spaces.
const FEATURES: [&str; 3] = ["image_selection", "placement", "artifact_cache"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The code of a file without its comments and without unit tests (which build routes of their own).
fn code_lines(path: &Path) -> Vec<String> {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return Vec::new();
    }
    std::fs::read_to_string(path)
        .expect("a source file")
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("//"))
        .map(str::to_owned)
        .collect()
}

/// Path → feature, for every `Route::new(CONST, ..)` in a feature's room, the constant read from
/// its `const NAME: &str = "/…";` in the same room.
fn routes_in_code() -> BTreeMap<String, String> {
    let mut routes = BTreeMap::new();
    for feature in FEATURES {
        let lines: Vec<String> = rust_files(&root().join("src").join(feature))
            .iter()
            .flat_map(|file| code_lines(file))
            .collect();
        let consts: BTreeMap<&str, &str> = lines
            .iter()
            .filter_map(|line| {
                let rest = line.split("const ").nth(1)?;
                let (name, value) = rest.split_once(": &str = \"")?;
                Some((name, value.strip_suffix("\";")?))
            })
            .collect();
        for (at, line) in lines.iter().enumerate() {
            let Some(call) = line.split("Route::new(").nth(1) else {
                continue;
            };
            let argument = call.split([',', ')']).next().unwrap_or_default().trim();
            let argument = if argument.is_empty() {
                // `Route::new(` with its arguments on the next lines, as rustfmt writes long calls.
                lines[at + 1].trim_end_matches(',').to_owned()
            } else {
                argument.to_owned()
            };
            let name = argument.rsplit("::").next().unwrap_or_default();
            let path = consts
                .get(name)
                .unwrap_or_else(|| panic!("{feature}: the route constant {argument} not found"));
            routes.insert((*path).to_owned(), feature.replace('_', " "));
        }
    }
    routes
}

/// The features whose room holds a `controller` module.
fn controllers_in_code() -> BTreeSet<String> {
    FEATURES
        .iter()
        .filter(|feature| {
            let room = root().join("src").join(feature);
            room.join("controller.rs").exists() || room.join("controller").is_dir()
        })
        .map(|feature| feature.replace('_', " "))
        .collect()
}

/// A CRD as the docs list it: its name, kind, condition types and reasons.
#[derive(Debug, PartialEq)]
struct Crd {
    kind: String,
    conditions: BTreeSet<String>,
    reasons: BTreeSet<String>,
}

fn crd<K: CustomResourceExt>(kind: &str, conditions: &[&str], reasons: &[&str]) -> (String, Crd) {
    (
        K::crd_name().to_owned(),
        Crd {
            kind: kind.to_owned(),
            conditions: conditions.iter().map(|c| (*c).to_owned()).collect(),
            reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
        },
    )
}

fn crds_in_code() -> BTreeMap<String, Crd> {
    BTreeMap::from([
        crd::<ImageSelectionPolicy>(
            "ImageSelectionPolicy",
            &ConditionType::ALL.map(ConditionType::as_str),
            &Reason::ALL.map(Reason::as_str),
        ),
        crd::<PlacementPolicy>(
            "PlacementPolicy",
            &[ConditionType::Ready.as_str()],
            &PlacementReason::ALL.map(PlacementReason::as_str),
        ),
        crd::<ArtifactCache>(
            "ArtifactCache",
            &[ConditionType::Ready.as_str()],
            &CacheReason::ALL.map(CacheReason::as_str),
        ),
    ])
}

/// The table rows of a `## heading` section of a docs page, as cells without their backticks.
fn rows(page: &str, heading: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join("docs").join(page)).expect("the docs page");
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("docs/{page} has no section `## {heading}`"));
    section
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| ---"))
        .skip(1)
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().replace('`', ""))
                .collect()
        })
        .collect()
}

fn words(cell: &str) -> BTreeSet<String> {
    cell.split([',', ' '])
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn docs_controller_lists_every_route_with_the_feature_answering_it() {
    let code = routes_in_code();
    assert!(
        code.contains_key("/mutate") && code.len() >= 4,
        "routes read from src/: {code:?}"
    );
    let docs: BTreeMap<String, String> = rows("controller.md", "Routes")
        .into_iter()
        .map(|cells| (cells[0].clone(), cells[1].clone()))
        .collect();
    assert_eq!(
        code, docs,
        "the routes in src/ (path → feature) and docs/controller.md's `## Routes` table differ: \
         add `| `PATH` | FEATURE | what it admits |`"
    );
}

#[test]
fn docs_controller_lists_every_crd_with_its_conditions_and_reasons() {
    let code = crds_in_code();
    let docs: BTreeMap<String, Crd> = rows("controller.md", "CRDs")
        .into_iter()
        .map(|cells| {
            (
                cells[0].clone(),
                Crd {
                    kind: cells[1].clone(),
                    conditions: words(&cells[3]),
                    reasons: words(&cells[4]),
                },
            )
        })
        .collect();
    for (name, crd) in &code {
        let documented = docs.get(name).unwrap_or_else(|| {
            panic!("docs/controller.md's `## CRDs` table has no row for {name} ({crd:?})")
        });
        assert_eq!(documented, crd, "docs/controller.md's row for {name}");
    }
    let gone: Vec<_> = docs.keys().filter(|n| !code.contains_key(*n)).collect();
    assert!(
        gone.is_empty(),
        "docs/controller.md lists CRDs ocifit does not define: {gone:?}"
    );
}

#[test]
fn docs_controller_lists_every_feature_controller() {
    let code = controllers_in_code();
    assert_eq!(code.len(), 3, "controllers read from src/: {code:?}");
    let docs: BTreeSet<String> = rows("controller.md", "Controllers")
        .into_iter()
        .map(|cells| cells[0].clone())
        .collect();
    assert_eq!(
        code, docs,
        "the features with a controller in src/ and docs/controller.md's `## Controllers` table differ"
    );
}

#[test]
fn docs_flags_names_every_route_the_admission_host_serves() {
    let code: BTreeSet<String> = routes_in_code().into_keys().collect();
    let text = std::fs::read_to_string(root().join("docs/flags.md")).expect("docs/flags.md");
    let named: BTreeSet<String> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|span| span.strip_prefix("POST "))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        code, named,
        "the routes in src/ and the `POST /path` ones docs/flags.md names (--webhook-bind-address) differ"
    );
}
