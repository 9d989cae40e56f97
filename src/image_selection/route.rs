//! Image selection's admission route, `POST /mutate` on Pods: the planner over the current index
//! (a pod created before the first one is built is held), and the Event the answer deserves,
//! queued once it is sent: a Warning for a denial, a Normal one for a pin, on the policy the plan
//! was made under. Reads the plan only (its policy and reason), so the choice is never made twice;
//! the host asks only for reviews that were not a dry run, and the cluster view's rate-limited
//! queue publishes them. It owns the Event wording around the planner's message, not the decision.

use std::time::Duration;

use crate::admission::Request;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::core::admission::Operation;

use super::feed::SharedIndex;
use super::planner::{Decision, DenyReason, ImagePlan, SkipReason};
use crate::admission::Planner;
use crate::cluster::{Notice, Notices};
use crate::image_selection::planner::SelectionPod;
use crate::image_selection::planner::hold;

/// The path the MutatingWebhookConfiguration calls.
pub const PATH: &str = "/mutate";

/// Plans pod creations from the shared index.
#[derive(Clone, Debug)]
pub struct MutatePods {
    /// The index the feed keeps current.
    pub index: SharedIndex,
    /// Where Events go; `None` publishes none.
    pub notices: Option<Notices>,
}

impl Planner for MutatePods {
    type Object = SelectionPod;
    type Plan = ImagePlan;

    // A lookup in the index per container and init container, which the array limit caps; the
    // Event is queued without waiting.
    const BOUNDED: bool = true;

    fn plan(&self, request: &Request<SelectionPod>) -> ImagePlan {
        match self.index.load() {
            Some(index) => index.plan(request),
            None => match &request.object {
                Some(pod) if request.operation == Operation::Create => {
                    hold(&pod.0, None, DenyReason::NotReady)
                }
                _ => ImagePlan::Skip(SkipReason::NotPodCreation),
            },
        }
    }

    fn answered(&self, request: &Request<SelectionPod>, plan: ImagePlan) {
        if let Some(notices) = &self.notices
            && let Some(notice) = notice(request, &plan)
        {
            // The policy's Event is charged to the pod's namespace, which caused it.
            notices.send_caused_by(request.namespace.as_deref().unwrap_or_default(), notice);
        }
    }
}

/// At most one Event per policy and reason in this window.
pub(super) const WINDOW: Duration = Duration::from_secs(60);

/// The Event `plan` deserves, if any: a denial under a known policy, or a pin.
pub fn notice(request: &Request<SelectionPod>, plan: &ImagePlan) -> Option<Notice> {
    let pod = &request.object.as_ref()?.0;
    let who = pod_name(request, pod);
    match plan {
        ImagePlan::Deny {
            policy: Some(policy),
            reason,
        } => Some(Notice {
            on: policy.object_ref(&()),
            warning: true,
            reason: reason.as_str(),
            action: "Admit",
            note: format!("denied pod {who}: {reason}"),
        }),
        ImagePlan::Patch {
            policy,
            decision: Decision::Pinned,
            event,
            ..
        } => Some(Notice {
            on: policy.object_ref(&()),
            warning: false,
            reason: Decision::Pinned.as_str(),
            action: "Admit",
            note: format!("pinned pod {who}: {event}"),
        }),
        _ => None,
    }
}

/// `namespace/name`, or `namespace/generateName*` for a pod named by the apiserver later.
fn pod_name(request: &Request<SelectionPod>, pod: &Pod) -> String {
    let namespace = request
        .namespace
        .as_deref()
        .or(pod.metadata.namespace.as_deref())
        .unwrap_or("default");
    match (
        pod.metadata.name.as_deref(),
        pod.metadata.generate_name.as_deref(),
    ) {
        (Some(name), _) if !name.is_empty() => format!("{namespace}/{name}"),
        (_, Some(prefix)) => format!("{namespace}/{prefix}* (generateName)"),
        _ if !request.name.is_empty() => format!("{namespace}/{}", request.name),
        _ => format!("{namespace}/(unnamed)"),
    }
}

#[cfg(test)]
mod tests;
