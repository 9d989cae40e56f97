//! Image selection's admission route, `POST /mutate` on Pods: the planner over the current index
//! (a pod created before the first one is built is held), and the Event the answer deserves
//! queued once it is sent.

use crate::admission::Request;
use kube::core::admission::Operation;

use super::events::notice;
use super::feed::SharedIndex;
use super::planner::{DenyReason, ImagePlan, SkipReason};
use crate::admission::Planner;
use crate::cluster::Notices;
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

#[cfg(test)]
mod tests;
