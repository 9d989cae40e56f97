//! The pod contract's example table (`docs/pod-contract.md`) holds: each pod under `example/pods/`, planned against the
//! example policies (`example/policy.yaml`, `example/policies/`) resolved by the controller's own
//! status computation over the example nodes, has the outcome its row states. The files are
//! parsed as users apply them; the expected outcomes are read from the page, so the table, the
//! files and the planner cannot drift apart. Also for every example pod: a dry run gets the same
//! answer, and a patched pod sent again (reinvocation) is left alone; and the denial and warning
//! messages the page quotes are the planner's own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Node;
use ocifit::admission::Request;
use ocifit::api::ImageSelectionPolicy;
use ocifit::api::pod::DECISION_IMAGES;
use ocifit::engine::NodeInputs;
use ocifit::image_selection::SelectionPod;
use ocifit::image_selection::{ImagePlan, Index};
use serde_json::Value;

use ocifit_testkit::review::create_request;

use ocifit_cluster_tests::flavor_example::FlavorExample;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `.yaml` files of a directory of the repository, sorted.
fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo(dir))
        .expect("the directory is readable")
        .map(|entry| entry.expect("the directory entry is readable").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

fn node_inputs(node: &Node) -> (String, NodeInputs) {
    (
        node.metadata
            .name
            .clone()
            .expect("an example node has a name"),
        NodeInputs::new(node.metadata.labels.clone().unwrap_or_default()),
    )
}

/// The example cluster a row of the table names.
fn cluster(name: &str) -> Vec<(String, NodeInputs)> {
    let list: Value = serde_json::from_str(&read(&repo("example/flavor-nodes.json")))
        .expect("example/flavor-nodes.json is JSON");
    let flavors: Vec<(String, NodeInputs)> = list["items"]
        .as_array()
        .expect("a NodeList has items")
        .iter()
        .map(|item| {
            node_inputs(&serde_json::from_value(item.clone()).expect("an example node is a Node"))
        })
        .collect();
    match name {
        "flavors" => flavors,
        "flavors + mint" => {
            let mint: Node = yaml(&repo("example/mint-node.yaml"));
            flavors.into_iter().chain([node_inputs(&mint)]).collect()
        }
        "vanilla only" => flavors
            .into_iter()
            .filter(|(name, _)| name == "control-plane" || name == "worker-vanilla")
            .collect(),
        other => panic!("{CONTRACT} names an unknown example cluster {other:?}"),
    }
}

/// Every example policy, with the status the controller computes for it over `nodes`.
fn policies(nodes: &[(String, NodeInputs)]) -> Vec<ImageSelectionPolicy> {
    let example = FlavorExample::load().expect("the flavor example artifact");
    let mut files = vec![repo("example/policy.yaml")];
    files.extend(yaml_files("example/policies"));
    files
        .iter()
        .map(|file| example.resolve(yaml(file), nodes))
        .collect()
}

/// The AdmissionRequest the apiserver sends when `pod` is created.
fn request(pod: &Value, dry_run: bool) -> Request<SelectionPod> {
    serde_json::from_value(create_request(pod, dry_run)).expect("a valid AdmissionRequest")
}

/// The outcome as the table writes it: `ImageSelected debian:11`, `denied Unpinned`,
/// `skipped DaemonSetPod`, `held PolicyNotFound`.
fn outcome(plan: &ImagePlan, pod: &Value) -> String {
    match plan {
        ImagePlan::Patch {
            decision,
            annotations,
            ..
        } => {
            let images: BTreeMap<String, String> =
                serde_json::from_str(&annotations[DECISION_IMAGES])
                    .expect("the images annotation is a JSON map");
            let image = images
                .values()
                .next()
                .expect("a patch replaces at least one image");
            assert!(
                images.values().all(|other| other == image),
                "{pod}: one image for every replaced container: {images:?}"
            );
            format!("{} {image}", decision.as_str())
        }
        ImagePlan::Deny { reason, .. } => format!("denied {}", reason.as_str()),
        ImagePlan::Skip(reason) => format!("skipped {}", reason.as_str()),
        ImagePlan::Hold { reason, .. } => format!("held {}", reason.as_str()),
    }
}

/// The page that documents the pod contract, with its table of example pods.
const CONTRACT: &str = "docs/pod-contract.md";

/// A row of the pod table: the pod file (from the repository's root), the cluster, the outcome.
struct Row {
    file: String,
    cluster: String,
    outcome: String,
}

/// The rows of the table of example pods: lines `| [`x.yaml`](../example/pods/x.yaml) |
/// cluster | `outcome` | what happens |`.
fn table_rows() -> Vec<Row> {
    read(&repo(CONTRACT))
        .lines()
        .filter(|line| line.starts_with("| [`") && line.contains("](../example/pods/"))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (link, cluster, outcome) = (cells[1], cells[2], cells[3]);
            let file = link
                .split_once("](")
                .and_then(|(_, rest)| rest.strip_suffix(')'))
                .and_then(|link| link.strip_prefix("../"))
                .unwrap_or_else(|| panic!("{CONTRACT}: a row without a link: {line}"));
            Row {
                file: file.to_owned(),
                cluster: cluster.to_owned(),
                outcome: outcome.trim_matches('`').to_owned(),
            }
        })
        .collect()
}

#[test]
fn every_example_pod_has_the_outcome_the_pod_contract_states() {
    let rows = table_rows();
    let listed: Vec<&str> = rows.iter().map(|row| row.file.as_str()).collect();
    for file in yaml_files("example/pods") {
        let name = format!(
            "example/pods/{}",
            file.file_name().unwrap().to_string_lossy()
        );
        assert!(
            listed.contains(&name.as_str()),
            "{name} has no row in the pod table of {CONTRACT}"
        );
    }
    let mut failures = Vec::new();
    for row in &rows {
        let nodes = cluster(&row.cluster);
        let policies = policies(&nodes);
        let index = Index::over_inputs(&policies, &nodes);
        let pod: Value = yaml(&repo(&row.file));
        let plan = index.plan(&request(&pod, false));
        let got = outcome(&plan, &pod);
        if got != row.outcome {
            failures.push(format!(
                "{} on {}: {CONTRACT} says {:?}, planner says {got:?} ({plan:?})",
                row.file, row.cluster, row.outcome
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_dry_run_gets_the_same_answer_and_a_patched_pod_sent_again_is_left_alone() {
    for row in table_rows() {
        let nodes = cluster(&row.cluster);
        let policies = policies(&nodes);
        let index = Index::over_inputs(&policies, &nodes);
        let mut pod: Value = yaml(&repo(&row.file));
        let plan = index.plan(&request(&pod, false));
        assert_eq!(
            index.plan(&request(&pod, true)),
            plan,
            "{}: a dry run is planned alike",
            row.file
        );
        if let ImagePlan::Patch { patch, .. } = plan {
            json_patch::patch(&mut pod, &patch).unwrap();
            let again = index.plan(&request(&pod, false));
            assert_eq!(
                outcome(&again, &pod),
                "skipped AlreadyPlanned",
                "{}: reinvoked over its own patch",
                row.file
            );
        }
    }
}

/// The messages the page quotes after its pod table: lines `FILE  denied: MESSAGE` or
/// `FILE  Warning: MESSAGE` in the code block that follows "What `kubectl apply -f` prints".
fn quoted_messages() -> Vec<(String, String, String)> {
    let page = read(&repo(CONTRACT));
    let block = page
        .split_once("What `kubectl apply -f` prints")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block.to_owned())
        .expect("the pod contract quotes what kubectl prints");
    block
        .lines()
        .map(|line| {
            let (file, rest) = line
                .split_once(' ')
                .unwrap_or_else(|| panic!("{CONTRACT}: a message line without a file: {line}"));
            let (kind, message) = rest
                .trim_start()
                .split_once(": ")
                .unwrap_or_else(|| panic!("{CONTRACT}: a message line without a kind: {line}"));
            (file.to_owned(), kind.to_owned(), message.to_owned())
        })
        .collect()
}

#[test]
fn the_messages_the_pod_contract_quotes_are_the_planners() {
    let rows = table_rows();
    let quoted = quoted_messages();
    assert!(!quoted.is_empty());
    for (file, kind, message) in quoted {
        let row = rows
            .iter()
            .find(|row| row.file == format!("example/pods/{file}"))
            .unwrap_or_else(|| panic!("{file} is quoted but has no row in the pod table"));
        let nodes = cluster(&row.cluster);
        let policies = policies(&nodes);
        let index = Index::over_inputs(&policies, &nodes);
        let pod: Value = yaml(&repo(&row.file));
        let plan = index.plan(&request(&pod, false));
        let said = match (kind.as_str(), &plan) {
            ("denied", ImagePlan::Deny { reason, .. }) => reason.to_string(),
            ("Warning", plan) => plan.warnings().join("\n"),
            _ => panic!("{file}: {CONTRACT} quotes a {kind} but the planner says {plan:?}"),
        };
        // "(…)" in the quote stands for a part left out; the rest must appear in order.
        let mut rest = said.as_str();
        for part in message.split("(…)") {
            let at = rest.find(part).unwrap_or_else(|| {
                panic!("{file}: {CONTRACT} quotes {message:?}, the planner says {said:?}")
            });
            rest = &rest[at + part.len()..];
        }
    }
}
