//! The host's own denials through the real apiserver: a pod holding an array over the limit
//! (`TooLarge`) is refused with ocifit's own words, which the apiserver passes on because the
//! answer carries the request's uid (an answer without it is reported as a failed webhook call
//! instead). A busy host's answers carry the uid the same way (`server::tests::bounds`); slow
//! bodies do not make it busy (`faults::slow_bodies`).

use k8s_openapi::api::core::v1::EnvVar;
use ocifit::admission::MAX_ARRAY_ELEMENTS;

use super::{Served, flavored};

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
}
