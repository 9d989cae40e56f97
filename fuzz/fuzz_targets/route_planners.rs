//! Each route's planner as `ocifit run` holds it, over fixed inputs with no I/O: image selection
//! over the flavor example (its nodes, its artifact resolved at a fixed digest, the example
//! policy), the gate with a policy selecting pods labelled `app: web` above one selecting every
//! pod, and the steps with a Ready ArtifactCache `oras` in `default` and a helper image.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use ocifit::api::{ArtifactCache, ImageSelectionPolicy, PlacementPolicy};
use ocifit::artifact_cache::{Helper, Observed, StepJobs, StepPods, StepRegistries, Steps, status};
use ocifit::engine::{Artifact, Format, NodeInputs};
use ocifit::image_selection::{
    ArtifactState, Content, Index, MutatePods, PlatformLookup, Resolved, SharedIndex, StatusInputs,
    StatusLimits, policy_status,
};
use ocifit::placement::{GatePods, PolicySet, UsablePolicies};
use ocifit::registry::Platform;
use serde_json::{Value, json};

pub struct Planners {
    pub gate: GatePods,
    pub selection: MutatePods,
    pub step_pods: StepPods,
    pub step_jobs: StepJobs,
}

impl Planners {
    pub fn new() -> Planners {
        let steps = steps();
        Planners {
            gate: gate(),
            selection: selection(),
            step_pods: StepPods(steps.clone()),
            step_jobs: StepJobs(steps),
        }
    }
}

fn gate() -> GatePods {
    let policy = |name: &str, spec: Value| {
        Arc::new(PlacementPolicy::new(
            name,
            serde_json::from_value(spec).expect("a placement policy's spec"),
        ))
    };
    let set = PolicySet::compile([
        policy(
            "web",
            json!({"priority": 1, "podSelector": {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["web"]}]}}),
        ),
        policy("all", json!({})),
    ]);
    let policies = UsablePolicies::default();
    policies.store(set);
    GatePods {
        policies,
        namespaces: Writer::default().as_reader(),
        read_namespace: None,
        own_namespace: "ocifit-system".to_owned(),
    }
}

fn selection() -> MutatePods {
    let listed: Value = serde_json::from_str(include_str!("../../example/flavor-nodes.json"))
        .expect("the flavor nodes are JSON");
    let nodes: Vec<(String, NodeInputs)> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|node| {
            let name = node["metadata"]["name"].as_str().unwrap_or_default();
            let labels: BTreeMap<String, String> =
                serde_json::from_value(node["metadata"]["labels"].clone())
                    .expect("a node's labels");
            (name.to_owned(), NodeInputs::new(labels))
        })
        .collect();
    let artifact = Artifact::parse(
        Format::Ocifit,
        include_bytes!("../../example/flavor-compat.json"),
    )
    .expect("the flavor artifact parses");
    let resolved = Resolved {
        digest: "sha256:5eed".into(),
        format: Format::Ocifit,
        content: Content::Sets(artifact),
    };
    let platforms = resolved
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
    let mut policy: ImageSelectionPolicy = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ImageSelectionPolicy",
        "metadata": {"name": "flavors"},
        "spec": {"artifact": {"ref": "registry.example/flavor-compat:v1"},
                 "targetImage": "placeholder:latest", "onUnpinned": "Pin", "onNoMatch": "Deny"}
    }))
    .expect("the example policy");
    let epoch = Time(Timestamp::UNIX_EPOCH);
    let computed = policy_status(&StatusInputs {
        generation: Some(1),
        spec: &policy.spec,
        artifact: ArtifactState::Current(&resolved),
        nodes: &nodes,
        platforms: &platforms,
        previous: None,
        now: &epoch,
        limits: StatusLimits::WRITTEN,
    });
    policy.status = Some(computed.status);
    let index = SharedIndex::default();
    index.store(Index::over_inputs(std::slice::from_ref(&policy), &nodes));
    MutatePods {
        index,
        notices: None,
    }
}

fn steps() -> Steps {
    let mut cache: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "oras", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {}
    }))
    .expect("an artifact cache");
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "oras-registry", "generation": 1},
        "status": {"readyReplicas": 1, "observedGeneration": 1}
    }))
    .expect("a deployment");
    let service =
        serde_json::from_value(json!({"spec": {"clusterIP": "10.0.0.9"}})).expect("a service");
    let observed = Observed {
        deployment: &deployment,
        service: &service,
        pods: &[],
    };
    cache.status = Some(status(
        &cache,
        Some(observed),
        Some("oras-registry-credentials-x7k2p".into()),
        &Time(Timestamp::UNIX_EPOCH),
    ));
    let mut caches = Writer::default();
    caches.apply_watcher_event(&watcher::Event::Apply(cache));
    Steps {
        caches: caches.as_reader(),
        helper: Some(Helper {
            image: "registry.local/ocifit/ocifit:fuzz".into(),
            pull_policy: None,
        }),
        read_again: None,
        registries: StepRegistries::default(),
    }
}
