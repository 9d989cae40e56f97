//! The step routes on the one admission host: `POST /artifacts/pods` (Pods) and
//! `POST /artifacts/jobs` (batch/v1 Jobs, whose pod template is mutated). Each plans from the
//! reflected ArtifactCaches and the helper image `ocifit run` was given; the planner decides,
//! this file only looks the cache up and names the answer for the metrics. A cache the store does
//! not show Ready is read again from the apiserver before a step is refused: this replica's watch
//! may not have delivered the status the leader just wrote (a step created as soon as
//! `kubectl wait` saw the cache Ready would otherwise be denied `CacheNotReady`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::core::admission::AdmissionRequest;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use super::planner::{self, CacheState, Denial, Helper, StepPlan, StepRegistries};
use super::status::cache_state;
use crate::admission::route::{Planner, Response, Verdict};
use crate::api::ArtifactCache;

/// The path the Pod webhook calls.
pub const PODS: &str = "/artifacts/pods";
/// The path the Job webhook calls.
pub const JOBS: &str = "/artifacts/jobs";

/// What both routes plan with.
#[derive(Clone, Debug)]
pub struct Steps {
    /// The ArtifactCaches, as the watch reflects them.
    pub caches: Store<ArtifactCache>,
    /// The helper containers' image; `None` refuses every step that moves artifacts.
    pub helper: Option<Helper>,
    /// Reads a cache the store does not show Ready afresh; `None` trusts the store alone.
    pub read_again: Option<ReadAgain>,
    /// The registries a step's `registry` annotation may name.
    pub registries: StepRegistries,
}

/// Reads a cache `(namespace, name)` from the apiserver, as the leader last wrote it: `None` when
/// it is not there or cannot be read in time. Called on the blocking pool planning runs on.
#[derive(Clone)]
pub struct ReadAgain(pub Arc<ReadCache>);

/// The read behind [`ReadAgain`].
pub type ReadCache = dyn Fn(&str, &str) -> Option<ArtifactCache> + Send + Sync;

/// How long a step's admission waits to read a cache again: well inside the request's deadline.
const READ_AGAIN_WITHIN: Duration = Duration::from_millis(500);

impl ReadAgain {
    /// A GET from the apiserver (the ClusterRole's `get` on artifactcaches); `None` outside a
    /// Tokio runtime.
    pub fn from_apiserver(client: &Client) -> Option<ReadAgain> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let client = client.clone();
        Some(ReadAgain(Arc::new(move |namespace, name| {
            let api = Api::<ArtifactCache>::namespaced(client.clone(), namespace);
            // Planning runs on the blocking pool (`admission::server`), where waiting on the
            // runtime is allowed.
            let read = runtime.block_on(tokio::time::timeout(READ_AGAIN_WITHIN, api.get_opt(name)));
            match read {
                Ok(Ok(found)) => found,
                Ok(Err(error)) => {
                    tracing::debug!(%namespace, cache = %name, %error, "artifact cache not read again");
                    None
                }
                Err(_) => None,
            }
        })))
    }
}

impl fmt::Debug for ReadAgain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReadAgain")
    }
}

/// Plans Pods.
#[derive(Clone, Debug)]
pub struct StepPods(pub Steps);

/// Plans Jobs.
#[derive(Clone, Debug)]
pub struct StepJobs(pub Steps);

impl Steps {
    fn plan<K: kube::Resource<DynamicType = ()>>(
        &self,
        request: &AdmissionRequest<K>,
        plan: impl Fn(&K, &str, &dyn Fn(&str) -> CacheState, &Helper, &StepRegistries) -> StepPlan,
    ) -> StepPlan {
        let Some(object) = request.object.as_ref() else {
            return StepPlan::NotAStep;
        };
        let namespace = request.namespace.clone().unwrap_or_default();
        let caches = |name: &str| {
            let cache = self
                .caches
                .get(&ObjectRef::<ArtifactCache>::new(name).within(&namespace));
            match cache_state(cache.as_deref()) {
                ready @ CacheState::Ready { .. } => ready,
                stale => match self.read_again.as_ref().and_then(|r| r.0(&namespace, name)) {
                    Some(fresh) => cache_state(Some(&fresh)),
                    None => stale,
                },
            }
        };
        // Without a helper image nothing can be injected: a step is refused, anything else
        // passes as the planner says.
        let unset = Helper {
            image: String::new(),
            pull_policy: None,
        };
        let helper = self.helper.as_ref().unwrap_or(&unset);
        let planned = match plan(object, &namespace, &caches, helper, &self.registries) {
            StepPlan::Patch { .. } if self.helper.is_none() => {
                StepPlan::Deny(Denial::NoHelperImage)
            }
            other => other,
        };
        if let Some(settings) = object
            .meta()
            .annotations
            .as_ref()
            .and_then(planner::debug_settings)
        {
            tracing::info!(
                %namespace,
                name = object.meta().name.as_deref().unwrap_or_default(),
                kind = %K::kind(&Default::default()),
                ?settings,
                outcome = planned.reason(),
                "step settings (annotation debug)"
            );
        }
        planned
    }
}

impl Planner for StepPods {
    type Object = Pod;
    type Plan = StepPlan;

    fn plan(&self, request: &AdmissionRequest<Pod>) -> StepPlan {
        self.0.plan(request, planner::plan_pod)
    }
}

impl Planner for StepJobs {
    type Object = Job;
    type Plan = StepPlan;

    fn plan(&self, request: &AdmissionRequest<Job>) -> StepPlan {
        self.0.plan(request, planner::plan_job)
    }
}

impl Verdict for StepPlan {
    fn outcome(&self) -> &'static str {
        match self {
            StepPlan::Patch { .. } => "patched",
            StepPlan::Deny(_) => "denied",
            StepPlan::NotAStep | StepPlan::AlreadyInjected | StepPlan::Unchanged { .. } => {
                "skipped"
            }
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            StepPlan::NotAStep => "NotAStep",
            StepPlan::AlreadyInjected => "AlreadyInjected",
            StepPlan::Unchanged { .. } => "NothingToMove",
            StepPlan::Patch { .. } => "StepInjected",
            StepPlan::Deny(denial) => denial.name(),
        }
    }

    fn response(&self) -> Response<'_> {
        match self {
            StepPlan::Patch { patch, warnings } => Response::Allow {
                patch: Some(patch),
                warnings: warnings.clone(),
            },
            StepPlan::Unchanged { warnings } => Response::Allow {
                patch: None,
                warnings: warnings.clone(),
            },
            StepPlan::NotAStep | StepPlan::AlreadyInjected => Response::Allow {
                patch: None,
                warnings: Vec::new(),
            },
            StepPlan::Deny(denial) => Response::Deny(denial.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
