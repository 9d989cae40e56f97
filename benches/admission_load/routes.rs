//! ocifit's four admission routes as `ocifit run` serves them, over the bench's fixtures:
//! `/mutate` (the index built in process over the flavor nodes), `/placement` (one
//! PlacementPolicy selecting every pod), `/artifacts/pods` and `/artifacts/jobs` (a Ready
//! ArtifactCache `oras` in the requests' namespace, a helper image).

use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use ocifit::admission::Route;
use ocifit::api::{ArtifactCache, PlacementPolicy};
use ocifit::artifact_cache::{Helper, StepRegistries};
use ocifit::artifact_cache::{JOBS, PODS, StepJobs, StepPods, Steps};
use ocifit::artifact_cache::{Observed, status};
use ocifit::image_selection::Index;
use ocifit::image_selection::SharedIndex;
use ocifit::image_selection::{self, MutatePods};
use ocifit::placement::{self, GatePods};
use ocifit::placement::{PolicySet, UsablePolicies};
use serde_json::json;

use crate::fixture::{self, Expect};

/// One request body and what must be answered.
#[derive(Clone)]
pub struct Request {
    /// What it is, for the report.
    pub what: String,
    pub body: Bytes,
    pub expect: Expect,
}

/// The four routes, over `nodes` flavor nodes.
pub fn routes(nodes: usize) -> Result<Vec<Route>> {
    Ok(vec![
        Route::new(image_selection::PATH, mutate_pods(nodes)?),
        Route::new(placement::PATH, gate_pods()?),
        Route::new(PODS, StepPods(step_settings()?)),
        Route::new(JOBS, StepJobs(step_settings()?)),
    ])
}

/// The requests each route gets in turn, by path, with the answer each must get.
pub fn requests() -> Result<[(&'static str, Vec<Request>); 4]> {
    let steps_of = |made: Vec<(String, Vec<u8>)>| -> Vec<Request> {
        made.into_iter()
            .map(|(what, body)| Request {
                what,
                body: Bytes::from(body),
                expect: Expect::Step,
            })
            .collect()
    };
    Ok([
        (image_selection::PATH, pods(|answer| answer)?),
        (placement::PATH, pods(|_| Expect::Gated)?),
        (PODS, steps_of(fixture::step_pods()?)),
        (JOBS, steps_of(fixture::step_jobs()?)),
    ])
}

/// The example pods' reviews, each expecting what `expect` makes of its answer from `/mutate`.
pub fn pods(expect: fn(Expect) -> Expect) -> Result<Vec<Request>> {
    fixture::PODS
        .iter()
        .map(|(file, answer)| {
            Ok(Request {
                what: format!("example/pods/{file}"),
                body: Bytes::from(fixture::review(file)?),
                expect: expect(*answer),
            })
        })
        .collect()
}

/// Image selection over the example policy resolved over `nodes` flavor nodes.
fn mutate_pods(nodes: usize) -> Result<MutatePods> {
    let nodes = fixture::nodes(nodes)?;
    let policy = fixture::policy(&nodes)?;
    let index = SharedIndex::default();
    index.store(Index::over_inputs(std::slice::from_ref(&policy), &nodes));
    Ok(MutatePods {
        index,
        notices: None,
    })
}

/// The gate with one PlacementPolicy selecting every pod.
fn gate_pods() -> Result<GatePods> {
    let set = PolicySet::compile([Arc::new(PlacementPolicy::new("all", Default::default()))]);
    if let Some(Err(err)) = set.get("all") {
        anyhow::bail!("the bench's policy does not compile: {err}");
    }
    let policies = UsablePolicies::default();
    policies.store(set);
    Ok(GatePods {
        policies,
        namespaces: Writer::default().as_reader(),
        // The policy selects every namespace: its name label is enough, nothing to read.
        read_namespace: None,
        own_namespace: "ocifit-system".to_owned(),
    })
}

/// The step routes' settings: a Ready cache `oras` (the annotations' default) in `default`.
fn step_settings() -> Result<Steps> {
    let mut cache: ArtifactCache = serde_json::from_value(json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "oras", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {}
    }))?;
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "oras-registry", "generation": 1},
        "status": {"readyReplicas": 1, "observedGeneration": 1}
    }))?;
    let service = serde_json::from_value(json!({"spec": {"clusterIP": "10.0.0.9"}}))?;
    let observed = Observed {
        deployment: &deployment,
        service: &service,
        pods: &[],
    };
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    cache.status = Some(status(
        &cache,
        Some(observed),
        Some("oras-registry-credentials-x7k2p".into()),
        &now,
    ));
    let mut caches = Writer::default();
    caches.apply_watcher_event(&watcher::Event::Apply(cache));
    Ok(Steps {
        caches: caches.as_reader(),
        helper: Some(Helper {
            image: "registry.local/ocifit/ocifit:bench".into(),
            pull_policy: None,
        }),
        read_again: None,
        registries: StepRegistries::default(),
    })
}
