//! The scale run at small sizes (the bench `cluster_scale` runs it at the issue's): kwok nodes
//! of three flavors and two architectures, many policies of both kinds, pods created at a steady
//! rate, in a burst and by a Deployment scaled up and down, through both pod webhooks at once.
//! Every admission succeeds, every gated pod is released, every opted-in pod gets its class's
//! image.

use std::path::Path;

use crate::support::scale::{GATE, MUTATE, Sizes, run};

#[tokio::test]
async fn pods_at_a_steady_rate_in_a_burst_and_by_a_deployment_are_all_admitted_released_and_given_their_image()
 {
    let report = run(
        Path::new(crate::support::ocifit_binary()),
        Sizes::from_env(Sizes {
            nodes: 30,
            policies: 5,
            opted_in: 60,
            gated: 60,
            rate: 20,
            replicas: 10,
        }),
    )
    .await;
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
        60,
        "every steady pod's release seen"
    );
    for webhook in [MUTATE, GATE] {
        let calls = report.webhooks.get(webhook).map_or(0.0, |w| w.calls);
        assert!(
            calls >= 60.0,
            "{webhook}: the apiserver measured {calls} calls"
        );
    }
}
