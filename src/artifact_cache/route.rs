//! The step routes on the one admission host: `POST /artifacts/pods` (Pods) and
//! `POST /artifacts/jobs` (batch/v1 Jobs, whose pod template is mutated). Each plans from the
//! reflected ArtifactCaches and the helper image `ocifit run` was given; the planner decides,
//! this file only looks the cache up and names the answer for the metrics.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::core::admission::AdmissionRequest;
use kube::runtime::reflector::{ObjectRef, Store};

use super::planner::{self, CacheState, Denial, Helper, Plan};
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
}

/// Plans Pods.
#[derive(Clone, Debug)]
pub struct StepPods(pub Steps);

/// Plans Jobs.
#[derive(Clone, Debug)]
pub struct StepJobs(pub Steps);

impl Steps {
    fn plan<K: kube::Resource>(
        &self,
        request: &AdmissionRequest<K>,
        plan: impl Fn(&K, &str, &dyn Fn(&str) -> CacheState, &Helper) -> Plan,
    ) -> Plan {
        let Some(object) = request.object.as_ref() else {
            return Plan::NotAStep;
        };
        let namespace = request.namespace.clone().unwrap_or_default();
        let caches = |name: &str| {
            let cache = self
                .caches
                .get(&ObjectRef::<ArtifactCache>::new(name).within(&namespace));
            cache_state(cache.as_deref())
        };
        // Without a helper image nothing can be injected: a step is refused, anything else
        // passes as the planner says.
        let unset = Helper {
            image: String::new(),
            pull_policy: None,
        };
        let helper = self.helper.as_ref().unwrap_or(&unset);
        match plan(object, &namespace, &caches, helper) {
            Plan::Patch { .. } if self.helper.is_none() => Plan::Deny(Denial::NoHelperImage),
            other => other,
        }
    }
}

impl Planner for StepPods {
    type Object = Pod;
    type Plan = Plan;

    fn plan(&self, request: &AdmissionRequest<Pod>) -> Plan {
        self.0.plan(request, planner::plan_pod)
    }
}

impl Planner for StepJobs {
    type Object = Job;
    type Plan = Plan;

    fn plan(&self, request: &AdmissionRequest<Job>) -> Plan {
        self.0.plan(request, planner::plan_job)
    }
}

impl Verdict for Plan {
    fn outcome(&self) -> &'static str {
        match self {
            Plan::Patch { .. } => "patched",
            Plan::Deny(_) => "denied",
            Plan::NotAStep | Plan::AlreadyInjected | Plan::Unchanged { .. } => "skipped",
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            Plan::NotAStep => "NotAStep",
            Plan::AlreadyInjected => "AlreadyInjected",
            Plan::Unchanged { .. } => "NothingToMove",
            Plan::Patch { .. } => "StepInjected",
            Plan::Deny(denial) => denial.name(),
        }
    }

    fn response(&self) -> Response<'_> {
        match self {
            Plan::Patch { patch, warnings } => Response::Allow {
                patch: Some(patch),
                warnings: warnings.clone(),
            },
            Plan::Unchanged { warnings } => Response::Allow {
                patch: None,
                warnings: warnings.clone(),
            },
            Plan::NotAStep | Plan::AlreadyInjected => Response::Allow {
                patch: None,
                warnings: Vec::new(),
            },
            Plan::Deny(denial) => Response::Deny(denial.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
