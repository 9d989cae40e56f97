//! `spec.artifact.candidates` on the real cluster and registry: each candidate image carries its
//! own NFD artifact, attached with regctl `artifact put --subject` as NFD documents it
//! (distribution serves no referrers API, so the `sha256-<hex>` tag schema carries them; the
//! ORAS Python SDK does not write that tag, so its referrers are invisible here and it is not
//! used); a candidate without one is skipped with the reason on every row; a candidate
//! that cannot run on a class's architecture gives way, and an index with the class's
//! architecture in any variant (linux/arm/v7 for `kubernetes.io/arch: arm`) is accepted.

use std::time::Duration;

use ocifit_testkit::{Candidates, PushedImage};

use crate::support::objects::{Policy, linux_node};
use crate::support::{Controller, Env, condition_message, is};

const AVX512F: &str = "feature.node.kubernetes.io/cpu-cpuid.AVX512F";

#[tokio::test]
async fn candidates_resolve_through_their_attached_nfd_artifacts() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let registry = env.registry();
    let Candidates {
        fast,
        portable,
        bare,
    } = registry
        .push_candidates(&["linux/amd64", "linux/arm/v7"])
        .await
        .expect("the candidates pushed");

    env.add_node(linux_node("avx").label(AVX512F, "true")).await;
    env.add_node(linux_node("plain")).await;
    env.add_node(
        linux_node("armv7")
            .label(AVX512F, "true")
            .label("kubernetes.io/arch", "arm"),
    )
    .await;
    let controller = Controller::start(&env, "candidates", &[]).await;

    each_class_gets_the_best_candidate_built_for_it(&env, [&bare, &fast, &portable]).await;
    a_policy_whose_candidates_have_no_artifact_is_a_condition(&env, &controller, &bare).await;

    assert!(
        controller
            .metric("ocifit_registry_requests_total{outcome=\"2xx\"}")
            .await
            >= 1.0
    );

    assert!(controller.stop().await.success());
}

/// bare has no artifact and is skipped on every row; fast needs AVX-512 and has no linux/arm;
/// portable fits anywhere, linux/arm/v7 included.
async fn each_class_gets_the_best_candidate_built_for_it(
    env: &Env,
    [bare, fast, portable]: [&PushedImage; 3],
) {
    env.create_policy(&Policy::on_candidates(
        "candidates",
        &[
            (&bare.reference, Some(30)),
            (&fast.reference, Some(20)),
            (&portable.reference, None),
        ],
    ))
    .await;
    let (status, took) = env
        .wait_status("candidates", Duration::from_secs(30), "Ready", |s| {
            is(s, "Ready", "True", "Resolved")
        })
        .await;
    println!("candidates policy Ready after {took:?}");
    let artifact = status.artifact.clone().expect("the artifact status");
    assert_eq!(artifact.format.as_str(), "nfd");
    assert_eq!(artifact.candidates, 2, "bare has no artifact");
    assert!(
        artifact.digest.starts_with("sha256:"),
        "{}",
        artifact.digest
    );
    assert_eq!(status.class_count, 3, "{status:#?}");
    let by_arch_and_avx = |arch: &str, avx: bool| {
        status
            .classes
            .iter()
            .find(|c| {
                c.labels.get("kubernetes.io/arch").map(String::as_str) == Some(arch)
                    && c.labels.contains_key("cpu.cpuid.flags/AVX512F") == avx
            })
            .unwrap_or_else(|| panic!("no {arch} class (avx512 {avx}) in {status:#?}"))
    };
    let avx = by_arch_and_avx("amd64", true);
    assert_eq!(avx.image.as_deref(), Some(fast.reference.as_str()));
    assert_eq!(avx.matched.as_ref().map(|m| m.index), Some(1));
    let plain = by_arch_and_avx("amd64", false);
    assert_eq!(plain.image.as_deref(), Some(portable.reference.as_str()));
    // fast's rules hold on the arm node but its index has no linux/arm: portable's linux/arm/v7
    // is taken, as nodes name no variant.
    let arm = by_arch_and_avx("arm", true);
    assert_eq!(arm.image.as_deref(), Some(portable.reference.as_str()));
    let arm_reason = arm.reason.clone().unwrap_or_default();
    assert!(
        arm_reason.contains(&format!(
            "skipped candidate 1 ({:?}): {} is not built for linux/arm",
            fast.reference, fast.reference
        )),
        "{arm_reason}"
    );
    for class in &status.classes {
        let reason = class.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains(&format!("skipped candidate 0 ({:?})", bare.reference))
                && reason.contains("NFD compatibility artifact referring to the image not found"),
            "{reason}"
        );
    }
    let printed = env.kubectl_get_isp("candidates").await;
    assert!(printed.contains(&artifact.digest), "{printed}");
}

/// Not a crash: ArtifactResolved False NotFound, and the lookups counted.
async fn a_policy_whose_candidates_have_no_artifact_is_a_condition(
    env: &Env,
    controller: &Controller,
    bare: &PushedImage,
) {
    env.create_policy(&Policy::on_candidates(
        "nothing-attached",
        &[(&bare.reference, None)],
    ))
    .await;
    let (status, _) = env
        .wait_status(
            "nothing-attached",
            Duration::from_secs(30),
            "NotFound",
            |s| is(s, "ArtifactResolved", "False", "NotFound"),
        )
        .await;
    let message = condition_message(&status, "ArtifactResolved");
    assert!(
        message.starts_with("no candidate image has an NFD compatibility artifact attached"),
        "{message}"
    );
    assert!(
        controller
            .metric(
                "ocifit_registry_lookups_total{lookup=\"candidate_artifact\",outcome=\"not_found\"}"
            )
            .await
            >= 2.0,
        "{}",
        controller.log_text()
    );
}
