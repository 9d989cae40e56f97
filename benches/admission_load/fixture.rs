//! What the load is made of: the flavor example scaled to a cluster of many nodes, the example
//! policy resolved over it by the controller's own status computation, and AdmissionReview
//! bodies as the apiserver sends them: example pods, and the artifact workflow's step Jobs and
//! the pods they create.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ocifit::api::ImageSelectionPolicy;
use ocifit::engine::NodeInputs;
use serde_json::{Value, json};

use ocifit_cluster_tests::flavor_example::FlavorExample;
use ocifit_testkit::review::{admission_review, create_request};

/// The example pods sent, with the answer each gets from ocifit: (file under `example/pods/`,
/// what the answer must be).
pub const PODS: [(&str, Expect); 3] = [
    ("vanilla.yaml", Expect::Patched),
    ("unpinned.yaml", Expect::Pinned),
    ("no-candidate.yaml", Expect::Denied),
];

/// The answer a pod must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Allowed unchanged, no warning (what the no-op server answers to everything).
    Unchanged,
    /// Allowed with a patch.
    Patched,
    /// Allowed with a patch and a warning (pinned).
    Pinned,
    /// Refused.
    Denied,
    /// Placement's gate: allowed without a warning, gated by a patch unless never selected.
    Gated,
    /// A step: allowed with the helper's patch (warnings allowed).
    Step,
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> Result<String> {
    std::fs::read_to_string(repo(path)).with_context(|| format!("failed to read {path}"))
}

/// `count` workers, the flavor example's three workers repeated (each with its own name and
/// hostname), and its control-plane node.
pub fn nodes(count: usize) -> Result<Vec<(String, NodeInputs)>> {
    let list: Value = serde_json::from_str(&read("example/flavor-nodes.json")?)?;
    let mut workers = Vec::new();
    let mut out = Vec::new();
    for item in list["items"].as_array().into_iter().flatten() {
        let name = item["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let labels = serde_json::from_value(item["metadata"]["labels"].clone())?;
        let node = (name, NodeInputs::new(labels));
        if node
            .1
            .labels
            .contains_key("node-role.kubernetes.io/control-plane")
        {
            out.push(node);
        } else {
            workers.push(node);
        }
    }
    if workers.is_empty() {
        bail!("example/flavor-nodes.json has no worker");
    }
    for at in 0..count {
        let (template, inputs) = &workers[at % workers.len()];
        let name = format!("{template}-{at:05}");
        let mut inputs = inputs.clone();
        inputs
            .labels
            .insert("kubernetes.io/hostname".to_owned(), name.clone());
        out.push((name, inputs));
    }
    Ok(out)
}

/// `example/policy.yaml` with the status the controller computes over `nodes`.
pub fn policy(nodes: &[(String, NodeInputs)]) -> Result<ImageSelectionPolicy> {
    let example = FlavorExample::load().map_err(anyhow::Error::from_boxed)?;
    let policy = serde_saphyr::from_str(&read("example/policy.yaml")?)?;
    Ok(example.resolve(policy, nodes))
}

/// The AdmissionReview the apiserver sends to create the pod in `example/pods/FILE`.
pub fn review(file: &str) -> Result<Vec<u8>> {
    let pod: Value = serde_saphyr::from_str(&read(&format!("example/pods/{file}"))?)?;
    Ok(admission_review(create_request(&pod, false)))
}

/// Checks one answer against what the pod must get.
pub fn check(answer: &[u8], expect: Expect) -> Result<()> {
    let review: Value = serde_json::from_slice(answer).context("the answer is not JSON")?;
    let response = &review["response"];
    let allowed = response["allowed"].as_bool();
    let patched = response["patch"].is_string();
    let warned = response["warnings"]
        .as_array()
        .is_some_and(|warnings| !warnings.is_empty());
    let ok = match expect {
        Expect::Unchanged => allowed == Some(true) && !patched && !warned,
        Expect::Patched => allowed == Some(true) && patched && !warned,
        Expect::Pinned => allowed == Some(true) && patched && warned,
        Expect::Denied => allowed == Some(false),
        Expect::Gated => allowed == Some(true) && !warned,
        Expect::Step => allowed == Some(true) && patched,
    };
    if !ok {
        bail!("expected {expect:?}, got {review}");
    }
    Ok(())
}

/// The workflow example's step Jobs (`example/artifacts/workflow.yaml`), each as the
/// AdmissionReview that creates it: ("Job NAME", body).
pub fn step_jobs() -> Result<Vec<(String, Vec<u8>)>> {
    reviews("Job", |_, job| job.clone())
}

/// The pods the workflow example's Jobs create (their metadata, the template's spec), each as
/// the AdmissionReview that creates it: ("Pod NAME", body).
pub fn step_pods() -> Result<Vec<(String, Vec<u8>)>> {
    reviews("Pod", |name, job| {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": format!("{name}-x7k2p"),
                "namespace": "default",
                "annotations": job["metadata"]["annotations"],
            },
            "spec": job["spec"]["template"]["spec"],
        })
    })
}

/// For each of the workflow's Jobs, the AdmissionReview creating `object(job name, job)`:
/// ("KIND NAME", body).
fn reviews(kind: &str, object: impl Fn(&str, &Value) -> Value) -> Result<Vec<(String, Vec<u8>)>> {
    workflow()?
        .iter()
        .map(|job| {
            let name = job["metadata"]["name"].as_str().unwrap_or_default();
            let review = admission_review(create_request(&object(name, job), false));
            Ok((format!("{kind} {name}"), review))
        })
        .collect()
}

/// The Jobs of `example/artifacts/workflow.yaml`, moved to `default` (the namespace the
/// requests name, where the bench's cache is).
fn workflow() -> Result<Vec<Value>> {
    let mut jobs: Vec<Value> =
        serde_saphyr::from_multiple(&read("example/artifacts/workflow.yaml")?)?;
    for job in &mut jobs {
        job["metadata"]["namespace"] = json!("default");
    }
    if jobs.is_empty() {
        bail!("example/artifacts/workflow.yaml has no Job");
    }
    Ok(jobs)
}
