//! What the load is made of: the flavor example scaled to a cluster of many nodes, the example
//! policy resolved over it by the controller's own status computation, and AdmissionReview
//! bodies for example pods as the apiserver sends them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use ocifit::api::ImageSelectionPolicy;
use ocifit::engine::{Artifact, Format, NodeInputs};
use ocifit::registry::Platform;
use ocifit::resolution::platform::{PlatformLookup, Platforms};
use ocifit::resolution::status::{ArtifactState, Inputs, compute};
use ocifit::resolution::{Content, Resolved};
use serde_json::{Value, json};

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

/// `example/policy.yaml` with the status the controller computes over `nodes` (the flavor
/// images published for linux/amd64 and linux/arm64, as the real ones are).
pub fn policy(nodes: &[(String, NodeInputs)]) -> Result<ImageSelectionPolicy> {
    let bytes = std::fs::read(repo("example/flavor-compat.json"))?;
    let resolved = Resolved {
        digest: "sha256:5eed".into(),
        format: Format::Ocifit,
        content: Content::Sets(Artifact::parse(Format::Ocifit, &bytes)?),
    };
    let platforms: Platforms = resolved
        .images()
        .into_iter()
        .map(|image| {
            let found = ["amd64", "arm64"]
                .iter()
                .map(|arch| Platform {
                    os: "linux".into(),
                    architecture: (*arch).into(),
                    variant: None,
                    os_version: None,
                })
                .collect();
            (image, PlatformLookup::Known(found))
        })
        .collect();
    let mut policy: ImageSelectionPolicy = serde_saphyr::from_str(&read("example/policy.yaml")?)?;
    let computed = compute(&Inputs {
        generation: Some(1),
        spec: &policy.spec,
        artifact: ArtifactState::Current(&resolved),
        nodes,
        platforms: &platforms,
        previous: None,
        now: &Time(Timestamp::UNIX_EPOCH),
    });
    policy.status = Some(computed.status);
    Ok(policy)
}

/// The AdmissionReview the apiserver sends to create the pod in `example/pods/FILE`.
pub fn review(file: &str) -> Result<Vec<u8>> {
    let pod: Value = serde_saphyr::from_str(&read(&format!("example/pods/{file}"))?)?;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"],
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                         "uid": "0b0c7e2e-0000-4000-8000-000000000001",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                                    "system:authenticated"]},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    });
    Ok(serde_json::to_vec(&review)?)
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
    };
    if !ok {
        bail!("expected {expect:?}, got {review}");
    }
    Ok(())
}
