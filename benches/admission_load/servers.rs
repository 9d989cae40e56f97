//! The servers under load: the no-op, and ocifit's one admission host serving every route as
//! `ocifit run` does — `/mutate` (the index built in process over the flavor nodes),
//! `/placement` (one PlacementPolicy selecting every pod), `/artifacts/pods` and
//! `/artifacts/jobs` (a Ready ArtifactCache `oras` in the requests' namespace, a helper image) —
//! and each route's equal-I/O floor.

use std::sync::Arc;

use actix_web::dev::ServerHandle;
use anyhow::Result;
use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use ocifit::admission::Route;
use ocifit::admission::ServingCert;
use ocifit::admission::{DEADLINE, Host, admission_server};
use ocifit::api::{ArtifactCache, PlacementPolicy};
use ocifit::artifact_cache::{Helper, StepRegistries};
use ocifit::artifact_cache::{JOBS, PODS, StepJobs, StepPods, Steps};
use ocifit::artifact_cache::{Observed, status};
use ocifit::image_selection::Index;
use ocifit::image_selection::SharedIndex;
use ocifit::image_selection::{self, MutatePods};
use ocifit::placement::{self, GatePods};
use ocifit::placement::{PolicySet, UsablePolicies};
use ocifit::telemetry::Metrics;
use serde_json::json;

use crate::fixture::{self, Expect};
use crate::floor::{self, Canned};
use crate::load::Target;
use crate::noop;

/// The no-op's name in the report.
pub const NOOP: &str = "no-op";
/// The start of an equal-I/O floor's name, followed by its route's.
pub const FLOOR: &str = "floor ";

/// A server under load: its name in the report (the route's path), where it is, and the
/// requests sent to it in turn with the answer each must get.
pub struct Server {
    pub name: &'static str,
    pub target: Target,
    pub handle: ServerHandle,
    pub requests: Vec<Request>,
}

/// One request body and what must be answered.
#[derive(Clone)]
pub struct Request {
    /// What it is, for the report.
    pub what: String,
    pub body: Bytes,
    pub expect: Expect,
}

impl Server {
    /// The bodies, in turn.
    pub fn bodies(&self) -> Vec<Bytes> {
        self.requests.iter().map(|r| r.body.clone()).collect()
    }
}

/// The no-op first, then ocifit's routes among `routes` (all when empty).
pub fn start(
    nodes: usize,
    routes: &[String],
    ca_pem: &str,
    cert: Arc<ServingCert>,
) -> Result<Vec<Server>> {
    let pods = |expect: fn(Expect) -> Expect| -> Result<Vec<Request>> {
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
    };
    let steps_of = |made: Vec<(String, Vec<u8>)>| -> Vec<Request> {
        made.into_iter()
            .map(|(what, body)| Request {
                what,
                body: Bytes::from(body),
                expect: Expect::Step,
            })
            .collect()
    };
    let (noop_address, noop) = noop::start(ServingCert::server_config(Arc::clone(&cert))?)?;
    let mut servers = vec![Server {
        name: NOOP,
        target: Target::new(noop_address, ca_pem, "/mutate")?,
        handle: noop,
        requests: pods(|_| Expect::Unchanged)?,
    }];
    let wanted = |path: &str| routes.is_empty() || routes.iter().any(|r| r == path);
    let host = Host {
        routes: vec![
            Route::new(image_selection::PATH, mutate_pods(nodes)?),
            Route::new(placement::PATH, gate_pods()?),
            Route::new(PODS, StepPods(step_settings()?)),
            Route::new(JOBS, StepJobs(step_settings()?)),
        ],
        metrics: Metrics::new(None),
        deadline: DEADLINE,
        draining: Default::default(),
        client_ca: None,
        uncertified: Default::default(),
    };
    let (server, address) = admission_server(([127, 0, 0, 1], 0).into(), cert, host)?;
    let handle = server.handle();
    tokio::spawn(server);
    let ocifit: [(&'static str, Vec<Request>); 4] = [
        (image_selection::PATH, pods(|answer| answer)?),
        (placement::PATH, pods(|_| Expect::Gated)?),
        (PODS, steps_of(fixture::step_pods()?)),
        (JOBS, steps_of(fixture::step_jobs()?)),
    ];
    for (path, requests) in ocifit {
        if wanted(path) {
            servers.push(Server {
                name: path,
                target: Target::new(address, ca_pem, path)?,
                handle: handle.clone(),
                requests,
            });
        }
    }
    Ok(servers)
}

/// Each of ocifit's routes among `servers` gets its equal-I/O floor (named `floor ROUTE`),
/// answering each request with what the route answered to it (`answers`, in the order of
/// `servers` and their requests); one server holds them all.
pub fn floors(
    servers: &[Server],
    answers: &[Vec<Bytes>],
    ca_pem: &str,
    cert: Arc<ServingCert>,
) -> Result<Vec<Server>> {
    let mut canned = Vec::new();
    let mut routes = Vec::new();
    for (server, answers) in servers.iter().zip(answers) {
        if server.name == NOOP {
            continue;
        }
        let mut floor = Canned::default();
        for (request, answer) in server.requests.iter().zip(answers) {
            floor.add(request.body.clone(), answer.clone());
        }
        // Leaked: a handful of names that live as long as the run.
        let path: &'static str =
            Box::leak(format!("/floor{}", server.target.path).into_boxed_str());
        let name: &'static str = Box::leak(format!("{FLOOR}{}", server.name).into_boxed_str());
        canned.push((path.to_owned(), floor));
        routes.push((name, path, server.requests.clone()));
    }
    let (address, handle) = floor::start(ServingCert::server_config(cert)?, canned)?;
    routes
        .into_iter()
        .map(|(name, path, requests)| {
            Ok(Server {
                name,
                target: Target::new(address, ca_pem, path)?,
                handle: handle.clone(),
                requests,
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
