//! Failure rules and refresh on a real cluster and registry: a candidate image without the
//! class's architecture is skipped for that class; the refresh interval re-resolves the tag (no
//! content fetched when the digest is unchanged, a re-pushed tag followed after the interval and
//! not before); an invalid artifact is a condition with the engine's message; a registry outage
//! keeps the images and marks Degraded with an Event, and recovery clears it; a missing pull
//! Secret is a condition until the Secret appears (read again at each retry, not watched); a
//! Secret outside the allowed namespaces is a condition that says nothing about it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use ocifit_testkit::{Proxy, create_namespace};

use crate::support::objects::{Policy, linux_node};
use crate::support::{Controller, Env, condition, condition_message, is};

const REFRESH: &str = "10s";

fn set(image: &str, weight: i32, description: &str) -> String {
    format!(r#"{{"tag":"{image}","weight":{weight},"description":"{description}","rules":[]}}"#)
}

fn artifact(sets: &[String]) -> String {
    format!(
        r#"{{"version":"v1alpha1","compatibilities":[{}]}}"#,
        sets.join(",")
    )
}

#[tokio::test]
async fn failures_degrade_and_recover_and_refresh_follows_the_tag() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let registry = env.registry();
    registry
        .push_image("library/app", "amd64-only", "linux/amd64")
        .await
        .expect("crane push");
    registry
        .push_multi_platform("library/app", "portable", &["linux/amd64", "linux/arm64"])
        .await
        .expect("crane push");
    // Policies reach the registry through a proxy that can be switched off.
    let mut proxy = Proxy::start(registry.addr()).await.expect("the proxy");
    let fast = format!("{}/library/app:amd64-only", proxy.addr);
    let portable = format!("{}/library/app:portable", proxy.addr);
    env.push_artifact(
        "ocifit/arch:v1",
        &artifact(&[set(&fast, 10, "fast"), set(&portable, 0, "portable")]),
    )
    .await;
    env.add_node(linux_node("amd")).await;
    env.add_node(linux_node("arm").label("kubernetes.io/arch", "arm64"))
        .await;
    let controller = Controller::start(
        &env,
        "failures",
        &[
            "--plain-http-registry",
            &proxy.addr,
            "--max-retry-interval",
            "2s",
        ],
    )
    .await;
    let images = Images { fast, portable };

    let first_digest =
        a_candidate_not_built_for_arm64_is_skipped_for_that_class(&env, &proxy, &images).await;
    let refreshed_at =
        a_refresh_with_an_unchanged_digest_fetches_and_writes_nothing(&env, &controller).await;
    a_repushed_tag_is_followed_at_the_next_refresh_not_before(
        &env,
        &images,
        &first_digest,
        refreshed_at,
    )
    .await;
    an_invalid_artifact_is_a_condition_naming_set_and_expression(&env, &proxy).await;
    a_registry_outage_keeps_the_images_and_marks_degraded_until_it_ends(
        &env,
        &controller,
        &mut proxy,
    )
    .await;
    a_missing_pull_secret_is_a_condition_until_it_appears(&env, &proxy).await;
    a_pull_secret_outside_the_allowed_namespaces_is_not_read(&env, &proxy).await;

    assert!(controller.stop().await.success());
}

/// The two candidates, as the policies reach them through the proxy.
struct Images {
    /// linux/amd64 only, weight 10.
    fast: String,
    /// linux/amd64 and linux/arm64, weight 0.
    portable: String,
}

/// A policy on `path` in the registry behind the proxy, refreshed every [`REFRESH`].
fn via_proxy(name: &str, proxy: &Proxy, path: &str) -> Policy {
    Policy::on_artifact(name, &format!("{}/{path}", proxy.addr)).refresh_interval(REFRESH)
}

/// Returns the artifact digest resolved.
async fn a_candidate_not_built_for_arm64_is_skipped_for_that_class(
    env: &Env,
    proxy: &Proxy,
    Images { fast, portable }: &Images,
) -> String {
    env.create_policy(&via_proxy("arch", proxy, "ocifit/arch:v1"))
        .await;
    let (status, _) = env
        .wait_status("arch", Duration::from_secs(30), "Ready", |s| {
            is(s, "Ready", "True", "Resolved")
        })
        .await;
    let row = |arch: &str| {
        status
            .classes
            .iter()
            .find(|c| c.labels["kubernetes.io/arch"] == arch)
            .cloned()
            .expect("a row per architecture")
    };
    assert_eq!(row("amd64").image.as_deref(), Some(fast.as_str()));
    let arm = row("arm64");
    assert_eq!(arm.image.as_deref(), Some(portable.as_str()));
    let reason = arm.reason.unwrap_or_default();
    assert!(
        reason.contains(&format!("skipped set 0 (\"{fast}\"): {fast} is not built for linux/arm64 (it offers linux/amd64)")),
        "{reason}"
    );
    status.artifact.expect("artifact").digest
}

/// It asks for the tag again; returns when that was seen. "Writes nothing" is read from the
/// policy itself (its resourceVersion): the status-writes counter counts a write only once
/// ocifit has the apiserver's answer, which on a loaded machine can come after the test saw the
/// write it counts.
async fn a_refresh_with_an_unchanged_digest_fetches_and_writes_nothing(
    env: &Env,
    controller: &Controller,
) -> Instant {
    let content = "ocifit_registry_content_cache_misses_total";
    let tags = "ocifit_registry_tag_cache_misses_total";
    let (content_before, tags_before) = (
        controller.metric(content).await,
        controller.metric(tags).await,
    );
    let before = env.policies().get("arch").await.expect("the policy");
    let refreshed_at = controller
        .wait_metric_above(tags, tags_before, Duration::from_secs(15))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        controller.metric(content).await,
        content_before,
        "no content fetched"
    );
    let after = env.policies().get("arch").await.expect("the policy");
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "a refresh with nothing new writes nothing: status before {:?}, after {:?}",
        before.status, after.status
    );
    refreshed_at
}

async fn a_repushed_tag_is_followed_at_the_next_refresh_not_before(
    env: &Env,
    Images { fast, portable }: &Images,
    first_digest: &str,
    refreshed_at: Instant,
) {
    env.push_artifact(
        "ocifit/arch:v1",
        &artifact(&[set(portable, 10, "portable first"), set(fast, 0, "fast")]),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(refreshed_at.elapsed())).await;
    let status = env.status("arch").await.expect("a status");
    assert_eq!(
        status.artifact.expect("artifact").digest,
        first_digest,
        "followed before the refresh interval"
    );
    let (status, _) = env
        .wait_status("arch", Duration::from_secs(15), "the new digest", |s| {
            s.artifact
                .as_ref()
                .is_some_and(|a| a.digest != first_digest)
        })
        .await;
    let followed = refreshed_at.elapsed();
    eprintln!("MEASURE re-pushed tag followed {followed:?} after the previous refresh");
    assert!(followed >= Duration::from_secs(9), "{followed:?}");
    assert!(
        status
            .classes
            .iter()
            .all(|c| c.image.as_deref() == Some(portable.as_str()))
    );
}

async fn an_invalid_artifact_is_a_condition_naming_set_and_expression(env: &Env, proxy: &Proxy) {
    env.push_artifact(
        "ocifit/bad:v1",
        r#"{"version":"v1alpha1","compatibilities":[{"tag":"x:v1","rules":[{"matchFeatures":[{"matchExpressions":[{"op":"Like","key":"k","value":["v"]}]}]}]}]}"#,
    )
    .await;
    env.create_policy(&via_proxy("bad", proxy, "ocifit/bad:v1"))
        .await;
    let (status, _) = env
        .wait_status("bad", Duration::from_secs(15), "InvalidArtifact", |s| {
            is(s, "ArtifactResolved", "False", "InvalidArtifact")
        })
        .await;
    let message = condition_message(&status, "ArtifactResolved");
    assert!(
        message.contains("set 0 (\"x:v1\"), rule 0, term 0, expression 0 (key \"k\", op Like)")
            && message.contains("unknown operator \"Like\""),
        "{message}"
    );
    assert_eq!(message.matches("unknown operator").count(), 1, "{message}");
    assert!(is(&status, "Ready", "False", "InvalidArtifact"));
}

/// With an Event and no Event per failed retry; recovery clears it.
async fn a_registry_outage_keeps_the_images_and_marks_degraded_until_it_ends(
    env: &Env,
    controller: &Controller,
    proxy: &mut Proxy,
) {
    let before = env.status("arch").await.expect("a status");
    proxy.down().await;
    let (outage, _) = env
        .wait_status("arch", Duration::from_secs(30), "Degraded", |s| {
            is(s, "Degraded", "True", "StaleArtifact")
        })
        .await;
    assert_eq!(
        outage.classes, before.classes,
        "images kept during the outage"
    );
    assert_eq!(
        condition(&outage, "ArtifactResolved"),
        Some(("False".into(), "RegistryUnavailable".into()))
    );
    // The outage's transition publishes two Warning Events; count only once both arrived.
    env.wait_event("arch", "Warning", "StaleArtifact").await;
    let events = env
        .wait_event("arch", "Warning", "RegistryUnavailable")
        .await;
    assert!(
        controller
            .metric("ocifit_registry_lookups_total{lookup=\"artifact\",outcome=\"transport\"}")
            .await
            >= 1.0,
        "registry lookups are counted by outcome"
    );
    for (outcome, what) in [("2xx", "answered"), ("error", "refused")] {
        assert!(
            controller
                .metric(&format!(
                    "ocifit_registry_requests_total{{outcome=\"{outcome}\"}}"
                ))
                .await
                >= 1.0,
            "{what} HTTP requests are counted by outcome"
        );
    }
    let warnings = events.iter().filter(|(t, _, _)| t == "Warning").count();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let later = env.events("arch").await;
    assert_eq!(
        later.iter().filter(|(t, _, _)| t == "Warning").count(),
        warnings,
        "no event per failed retry: {later:?}"
    );
    proxy.up().await.expect("the proxy up again");
    let recovered = Instant::now();
    env.wait_status("arch", Duration::from_secs(30), "recovered", |s| {
        is(s, "Degraded", "False", "Current") && is(s, "Ready", "True", "Resolved")
    })
    .await;
    eprintln!(
        "MEASURE recovery after the registry returned: {:?}",
        recovered.elapsed()
    );
    env.wait_event("arch", "Normal", "Current").await;
}

async fn a_missing_pull_secret_is_a_condition_until_it_appears(env: &Env, proxy: &Proxy) {
    env.create_policy(
        &via_proxy("secret", proxy, "ocifit/arch:v1").pull_secret("regcred", "ocifit-system"),
    )
    .await;
    let (status, _) = env
        .wait_status("secret", Duration::from_secs(15), "SecretInvalid", |s| {
            is(s, "ArtifactResolved", "False", "SecretInvalid")
        })
        .await;
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.message == "pull secret ocifit-system/regcred not found"),
        "{:?}",
        status.conditions
    );
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "ocifit-system");
    secrets
        .create(&PostParams::default(), &dockerconfigjson("regcred"))
        .await
        .expect("the secret");
    env.wait_status("secret", Duration::from_secs(10), "Ready", |s| {
        is(s, "Ready", "True", "Resolved")
    })
    .await;
}

fn dockerconfigjson(name: &str) -> Secret {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": "{\"auths\":{}}"}
    }))
    .expect("a secret")
}

/// A valid Secret in a namespace not in `--pull-secret-namespaces` (default: the operator's
/// own) is refused with the same words as an absent one: the status tells a policy author
/// nothing about Secrets there.
async fn a_pull_secret_outside_the_allowed_namespaces_is_not_read(env: &Env, proxy: &Proxy) {
    create_namespace(&env.client, "elsewhere")
        .await
        .expect("a namespace");
    Api::<Secret>::namespaced(env.client.clone(), "elsewhere")
        .create(&PostParams::default(), &dockerconfigjson("regcred"))
        .await
        .expect("the secret");
    let mut messages = Vec::new();
    for (policy, secret) in [("present", "regcred"), ("absent", "nothing")] {
        env.create_policy(
            &via_proxy(policy, proxy, "ocifit/arch:v1").pull_secret(secret, "elsewhere"),
        )
        .await;
        let (status, _) = env
            .wait_status(policy, Duration::from_secs(15), "SecretNotAllowed", |s| {
                is(s, "ArtifactResolved", "False", "SecretNotAllowed")
            })
            .await;
        messages.push(condition_message(&status, "ArtifactResolved"));
    }
    assert_eq!(messages[0], messages[1]);
    assert_eq!(
        messages[0],
        "pull secrets are read only in the namespaces ocifit-system (--pull-secret-namespaces), \
         not in elsewhere"
    );
}
