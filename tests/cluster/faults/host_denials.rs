//! The host's own denials through the real apiserver: a pod holding an array over the limit
//! (`TooLarge`) and a pod sent while every place is taken (`Busy`) are refused with ocifit's
//! own words, which the apiserver passes on because the answer carries the request's uid
//! (an answer without it is reported as a failed webhook call instead). The apiserver keeps the
//! 429 of `Busy`, so kube's client retries it and the pod is admitted once a place is free.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::EnvVar;
use ocifit::admission::review::shape::MAX_ARRAY_ELEMENTS;
use ocifit::admission::server::MAX_IN_FLIGHT;
use serde_json::json;
use tokio::task::JoinSet;

use super::hostile::{pod, post, review};
use super::{NAMESPACE, Served, flavored};
use crate::support::objects::PLACEHOLDER;

const BUSY: &str = "ocifit_admissions_total{outcome=\"denied\",reason=\"Busy\"}";

/// The error the apiserver returned for `result`, as the user reads it.
fn refusal(result: Result<String, kube::Error>) -> String {
    let text = result.expect_err("the pod refused").to_string();
    assert!(!text.contains("failed calling webhook"), "{text}");
    text
}

#[tokio::test]
async fn the_hosts_own_denials_reach_the_user_through_the_apiserver() {
    let served = Served::start("faults-denials").await;

    let mut many = flavored("many-variables", "vanilla");
    many.spec.as_mut().expect("a spec").containers[0].env = Some(
        (0..=MAX_ARRAY_ELEMENTS)
            .map(|i| EnvVar {
                name: format!("V{i}"),
                value: Some("x".into()),
                ..EnvVar::default()
            })
            .collect(),
    );
    let too_large = refusal(served.create(&many).await);
    eprintln!("FAULT host-denials: TooLarge as the user sees it: {too_large}");
    assert!(
        too_large.contains("an array of more than 4096 elements, over ocifit's limit"),
        "{too_large}"
    );

    // A client that does not retry (kubectl) shows the 429 as it comes.
    let held = hold_every_place(&served).await;
    let manifest = serde_json::to_string(&flavored("while-busy", "vanilla")).expect("JSON");
    let busy = served
        .env
        .cluster
        .kubectl_with_input(["create", "-n", NAMESPACE, "-f", "-"], &manifest)
        .await
        .expect_err("refused while busy")
        .to_string();
    eprintln!("FAULT host-denials: Busy as kubectl shows it: {busy}");
    assert!(busy.contains("admission requests already: retry"), "{busy}");
    assert!(!busy.contains("failed calling webhook"), "{busy}");
    held.join_all().await;

    // kube's client retries a 429: the pod is admitted once a place is free.
    let busy_before = served.controller.metric(BUSY).await;
    let held = hold_every_place(&served).await;
    let started = Instant::now();
    let image = served
        .create(&flavored("retried", "vanilla"))
        .await
        .expect("admitted after a retry");
    let took = started.elapsed();
    held.join_all().await;
    let refused = served.controller.metric(BUSY).await - busy_before;
    eprintln!(
        "FAULT host-denials: Busy {refused} times, then admitted by kube's retry in {took:?}"
    );
    assert_eq!(image, served.by_flavor["vanilla"]);
    assert!(refused >= 1.0, "never busy");
}

/// Every place of the host held by a body that never ends (each until the 2 s deadline).
async fn hold_every_place(served: &Served) -> JoinSet<(String, Duration)> {
    let connector = served.connector();
    let stalled = Arc::new(review(
        pod(json!({"containers": [{"name": "c", "image": PLACEHOLDER}]})),
        None,
    ));
    let mut held = JoinSet::new();
    for _ in 0..MAX_IN_FLIGHT {
        held.spawn(post(
            connector.clone(),
            served.webhook_address.clone(),
            Arc::clone(&stalled),
            true,
        ));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    held
}
