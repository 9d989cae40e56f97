//! The admission routes' reads of their objects: any body read as each route reads it (the
//! gate's `GatePod`, image selection's `SelectionPod`, the steps' `StepPod` and `StepJob`) yields
//! either a request, which the route's planner decides (through the object's conversion to what
//! the planner reads) and whose encoded answer is a review answering the request's uid, or a
//! denial whose body is a well-formed review that refuses; nothing panics.

#![no_main]

use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use libfuzzer_sys::fuzz_target;
use ocifit::admission::{self, Answer, Planner, Request};
use ocifit::image_selection::notice;
use ocifit::placement::PodView;

mod route_planners;

/// Built once: each planner as its route holds it, over a small cluster, policies and a cache.
static PLANNERS: LazyLock<route_planners::Planners> = LazyLock::new(route_planners::Planners::new);

fuzz_target!(|body: &[u8]| {
    let planners = &*PLANNERS;
    // The view selection and the gate read (the planner takes the same view of the pod).
    route(&planners.gate, body, |request, _| {
        if let Some(pod) = request.object.as_deref() {
            let _ = PodView::from(pod);
        }
    });
    // What the route queues once it has answered: the Event the plan deserves.
    route(&planners.selection, body, |request, plan| {
        let _ = notice(request, plan);
    });
    route(&planners.step_pods, body, |_, _| {});
    route(&planners.step_jobs, body, |_, _| {});
});

/// Reads `body` as `planner`'s route does and, if it reads, plans and encodes the answer, then
/// hands the request and plan to `after`.
fn route<P: Planner>(planner: &P, body: &[u8], after: impl Fn(&Request<P::Object>, &P::Plan)) {
    match admission::read_review::<P::Object>(body) {
        Ok(request) => {
            let plan = planner.plan(&request);
            let answer = Answer::planned(&request.uid, &plan);
            let encoded = well_formed(&answer.body);
            assert_eq!(encoded["response"]["uid"], request.uid.as_str());
            assert!(encoded["response"]["allowed"].is_boolean());
            if let Some(patch) = encoded["response"]["patch"].as_str() {
                let patch = BASE64.decode(patch).expect("a patch is base64");
                let patch: serde_json::Value =
                    serde_json::from_slice(&patch).expect("a patch is JSON");
                assert!(patch.is_array(), "a JSON patch is an array: {patch}");
            }
            after(&request, &plan);
        }
        Err(denial) => {
            let encoded = well_formed(&denial.body);
            assert_eq!(encoded["response"]["allowed"], false);
        }
    }
}

/// `body` read as an `admission.k8s.io/v1` AdmissionReview.
fn well_formed(body: &[u8]) -> serde_json::Value {
    let review: serde_json::Value = serde_json::from_slice(body).expect("an answer is JSON");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1", "{review}");
    assert_eq!(review["kind"], "AdmissionReview", "{review}");
    review
}
