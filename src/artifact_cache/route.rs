//! The step routes on the one admission host: `POST /artifacts/pods` (Pods) and
//! `POST /artifacts/jobs` (batch/v1 Jobs, whose pod template is mutated), planned from the
//! reflected ArtifactCaches and the helper image `ocifit run` was given. A cache the store does
//! not show Ready is read again from the apiserver before a step is refused: this replica's watch
//! may lag the status the leader just wrote (a step created as soon as `kubectl wait` saw it
//! Ready). That read waits, so only such a step is planned on the blocking pool.

use std::cell::Cell;

use crate::admission::Request;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use super::planner::{self, CacheState, Denial, Helper, StepPlan, StepRegistries};
use super::status::cache_state;
use crate::admission::{Planner, Response, Verdict};
use crate::api::ArtifactCache;
use crate::artifact_cache::planner::{StepJob, StepPod};

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

/// Reads a cache from the apiserver, as the leader last wrote it: `None` when it is not there or
/// cannot be read in time. Called on the blocking pool only: a step whose cache the store shows
/// Ready is planned on the connection's worker, any other there.
pub(super) type ReadAgain = crate::cluster::ReadAgain<ObjectRef<ArtifactCache>, ArtifactCache>;

/// The step routes' read of a cache from the apiserver (the ClusterRole's `get` on
/// artifactcaches); `None` outside a Tokio runtime.
pub fn read_cache_again(client: &Client) -> Option<ReadAgain> {
    ReadAgain::from_apiserver(client, |client, cache: &ObjectRef<ArtifactCache>| {
        let caches = Api::<ArtifactCache>::namespaced(
            client,
            cache.namespace.as_deref().unwrap_or_default(),
        );
        let name = cache.name.clone();
        async move { caches.get_opt(&name).await }
    })
}

/// Plans Pods.
#[derive(Clone, Debug)]
pub struct StepPods(pub Steps);

/// Plans Jobs.
#[derive(Clone, Debug)]
pub struct StepJobs(pub Steps);

/// What the step routes' planners are given: the object, its namespace, the caches by name,
/// the helper image and the registries a step may name.
type PlanStep<K> = fn(&K, &str, &dyn Fn(&str) -> CacheState, &Helper, &StepRegistries) -> StepPlan;

impl Steps {
    /// The plan on the blocking pool, where a cache the store does not show Ready is read again.
    fn plan_waiting<K: kube::Resource<DynamicType = ()>>(
        &self,
        request: &Request<K>,
        plan: PlanStep<K>,
    ) -> StepPlan {
        let planned = self.decide(request, plan, None);
        logged(request, planned)
    }

    /// The plan on the connection's worker, or `None` when a cache the step names is not Ready
    /// in the store and must be read again (on the pool).
    fn plan_now<K: kube::Resource<DynamicType = ()>>(
        &self,
        request: &Request<K>,
        plan: PlanStep<K>,
    ) -> Option<StepPlan> {
        let declined = Cell::new(false);
        let planned = self.decide(request, plan, Some(&declined));
        (!declined.get()).then(|| logged(request, planned))
    }

    /// The plan; with `declined`, no cache is read again and `declined` is set instead when one
    /// would be.
    fn decide<K: kube::Resource<DynamicType = ()>>(
        &self,
        request: &Request<K>,
        plan: PlanStep<K>,
        declined: Option<&Cell<bool>>,
    ) -> StepPlan {
        let Some(object) = request.object.as_ref() else {
            return StepPlan::NotAStep;
        };
        let namespace = request.namespace.as_deref().unwrap_or_default();
        let caches = |name: &str| {
            let key = ObjectRef::<ArtifactCache>::new(name).within(namespace);
            let stored = cache_state(self.caches.get(&key).as_deref());
            let (
                CacheState::Starting { .. } | CacheState::NotReady { .. } | CacheState::Missing,
                Some(read_again),
            ) = (&stored, &self.read_again)
            else {
                return stored;
            };
            if let Some(declined) = declined {
                declined.set(true);
                return stored;
            }
            match read_again.read(&key) {
                Some(fresh) => cache_state(Some(&fresh)),
                None => stored,
            }
        };
        // Without a helper image nothing can be injected: a step is refused, anything else
        // passes as the planner says.
        let unset = Helper {
            image: String::new(),
            pull_policy: None,
        };
        let helper = self.helper.as_ref().unwrap_or(&unset);
        match plan(object, namespace, &caches, helper, &self.registries) {
            StepPlan::Patch { .. } | StepPlan::Held { .. } | StepPlan::Deferred { .. }
                if self.helper.is_none() =>
            {
                StepPlan::Deny(Denial::NoHelperImage)
            }
            other => other,
        }
    }
}

/// `planned`, logged with the step's settings when its `debug` annotation asks for it.
fn logged<K: kube::Resource<DynamicType = ()>>(
    request: &Request<K>,
    planned: StepPlan,
) -> StepPlan {
    let Some(object) = request.object.as_ref() else {
        return planned;
    };
    if let Some(settings) = object
        .meta()
        .annotations
        .as_ref()
        .and_then(planner::debug_settings)
    {
        tracing::info!(
            namespace = request.namespace.as_deref().unwrap_or_default(),
            name = object.meta().name.as_deref().unwrap_or_default(),
            kind = %K::kind(&Default::default()),
            ?settings,
            outcome = planned.reason(),
            "step settings (annotation debug)"
        );
    }
    planned
}

// Bounded by the request: the annotations and the pod spec (which the host caps) against the
// cache in memory. A step whose cache the store does not show Ready is planned on the pool,
// where the cache is read again (`plan_now` declines).
impl Planner for StepPods {
    type Object = StepPod;
    type Plan = StepPlan;

    const BOUNDED: bool = true;

    fn plan(&self, request: &Request<StepPod>) -> StepPlan {
        self.0.plan_waiting(request, plan_pod)
    }

    fn plan_now(&self, request: &Request<StepPod>) -> Option<StepPlan> {
        self.0.plan_now(request, plan_pod)
    }
}

impl Planner for StepJobs {
    type Object = StepJob;
    type Plan = StepPlan;

    const BOUNDED: bool = true;

    fn plan(&self, request: &Request<StepJob>) -> StepPlan {
        self.0.plan_waiting(request, plan_job)
    }

    fn plan_now(&self, request: &Request<StepJob>) -> Option<StepPlan> {
        self.0.plan_now(request, plan_job)
    }
}

fn plan_pod(
    pod: &StepPod,
    namespace: &str,
    caches: &dyn Fn(&str) -> CacheState,
    helper: &Helper,
    registries: &StepRegistries,
) -> StepPlan {
    planner::plan_pod(&pod.0, namespace, caches, helper, registries)
}

fn plan_job(
    job: &StepJob,
    namespace: &str,
    caches: &dyn Fn(&str) -> CacheState,
    helper: &Helper,
    registries: &StepRegistries,
) -> StepPlan {
    planner::plan_job(&job.0, namespace, caches, helper, registries)
}

impl Verdict for StepPlan {
    fn outcome(&self) -> &'static str {
        match self {
            StepPlan::Patch { .. } | StepPlan::Deferred { .. } => "patched",
            StepPlan::Held { .. } => "held",
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
            StepPlan::Held { .. } => "StepHeld",
            StepPlan::Deferred { .. } => "StepDeferred",
            StepPlan::Deny(denial) => denial.name(),
        }
    }

    fn response(&self) -> Response<'_> {
        match self {
            StepPlan::Patch { patch, warnings }
            | StepPlan::Held { patch, warnings }
            | StepPlan::Deferred { patch, warnings } => Response::Allow {
                patch: Some(patch.into()),
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
