//! The Events admission decisions deserve, on the policy the plan was made under: a Warning for
//! a denial, a Normal one for a pin. Reads the plan only (its policy and reason), so the choice
//! is never made twice; the host asks for them only when the request was not a dry run, and the
//! cluster view's rate-limited queue publishes them. It owns the Event wording around the
//! planner's message, not the decision.

use std::time::Duration;

use crate::admission::Request;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;

use super::planner::{Decision, ImagePlan};
use crate::cluster::Notice;
use crate::image_selection::planner::SelectionPod;

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
