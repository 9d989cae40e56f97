//! The scale run at small sizes (the bench `cluster_scale` runs it at the issue's; any size of the
//! `OCIFIT_SCALE_*` variables runs here too): kwok nodes of three flavors and two architectures,
//! many policies of both kinds, an ArtifactCache, pods created at a steady rate, in a burst and by
//! a Deployment scaled up and down through both pod webhooks at once, and workflow steps (bare
//! pods and Jobs) among the steady pods through the step webhooks. Every admission succeeds, every
//! gated pod is released, every opted-in pod gets its class's image, every step pod is injected.
//! A no-op webhook beside them, on the same pods, is the yardstick of what any webhook costs here.

use std::path::Path;

use crate::support::scale::{GATE, MUTATE, NOOP, STEP_JOBS, STEP_PODS, Sizes, run};

#[tokio::test]
async fn pods_at_a_steady_rate_in_a_burst_by_a_deployment_and_as_steps_are_all_admitted_released_and_given_their_image_or_helpers()
 {
    let sizes = Sizes::from_env(Sizes {
        nodes: 30,
        policies: 5,
        opted_in: 60,
        gated: 60,
        rate: 20,
        replicas: 10,
        steps: 10,
    });
    let report = run(Path::new(crate::support::ocifit_binary()), sizes).await;
    println!("{}", report.table());
    assert_eq!(report.failed_admissions, 0, "admissions refused or failed");
    assert!(
        report.unreleased.is_empty(),
        "never released: {:?}",
        report.unreleased
    );
    assert!(
        report.wrong_image.is_empty(),
        "without their class's image: {:?}",
        report.wrong_image
    );
    assert_eq!(
        report.steady_ms.len(),
        sizes.steady(),
        "every steady pod's release seen"
    );
    assert_eq!(report.step_pods, sizes.steps, "a pod for every step");
    assert!(
        report.uninjected.is_empty(),
        "step pods without ocifit's helpers: {:?}",
        report.uninjected
    );
    // Each webhook saw at least the pods created for it: the opted-in ones (the Deployment's
    // too) by image selection, every pod of the namespace by the gate, every step pod (the Jobs'
    // too) and every step Job by the step webhooks; the no-op yardstick every pod, as the gate.
    let replicas = usize::try_from(sizes.replicas).unwrap_or(0);
    let expected = [
        (MUTATE, sizes.opted_in + replicas),
        (GATE, sizes.opted_in + sizes.gated + replicas),
        (NOOP, sizes.opted_in + sizes.gated + replicas),
        (STEP_PODS, sizes.steps),
        (STEP_JOBS, sizes.step_jobs()),
    ];
    for (webhook, at_least) in expected {
        let calls = report.webhooks.get(webhook).map_or(0.0, |w| w.calls);
        assert!(
            calls >= at_least as f64,
            "{webhook}: the apiserver measured {calls} calls, fewer than the {at_least} pods or Jobs sent to it"
        );
    }
    // The allocator's gauges say what of ocifit's memory is live: the stores of nodes and
    // policies at least, never more than the allocator holds.
    for heap in [report.heap_before, report.heap_at_rest] {
        assert!(
            heap.allocated_bytes > 1048576.0 && heap.allocated_bytes <= heap.resident_bytes,
            "heap: {} B allocated, {} B resident",
            heap.allocated_bytes,
            heap.resident_bytes
        );
    }
}
