//! What the placement controller asks the registry, on a real apiserver and real registries
//! (images pushed by crane; the registry's access log counts every request): a private
//! repository read with the pod's pull Secret (and refused, naming the image, without it; a pull
//! Secret in a namespace outside `--pull-secret-namespaces` is not read, and an Event says how to
//! allow it; ocifit's own `--placement-docker-config` credentials read it only for a policy with
//! `operatorCredentials: true`, never for another policy's pod); a
//! tag rebuilt for another architecture not re-read for an `IfNotPresent` pod (the digest it
//! read stands, as the image a node pulled does) and re-read for an `Always` pod; an image of
//! an `imagePullPolicy: Never` container never asked for; 500 pods of 10 images released with one manifest request per image digest.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::Api;
use kube::api::{ListParams, PostParams};
use ocifit::api::placement_pod::{
    DIGESTS_ANNOTATION, MESSAGE_ANNOTATION, OUTCOME_ANNOTATION, PLATFORMS_ANNOTATION, POLICY_LABEL,
};
use ocifit_testkit::{Registry, pull_secret};
use serde_json::json;

use crate::support::Env;
use crate::support::placement::{self, annotation, create_policy, gates, wait_event, wait_pod};

const NAMESPACE: &str = "registry";
/// A namespace whose Secrets ocifit may not read (not in `--pull-secret-namespaces`).
const ELSEWHERE: &str = "registry-elsewhere";

/// How many `METHOD /v2/<repository>/manifests/` requests the registry's log holds after `offset`.
fn manifest_requests(registry: &Registry, offset: usize, method: &str, repository: &str) -> usize {
    let log = std::fs::read_to_string(registry.dir().join("registry.log")).unwrap();
    log.get(offset..)
        .unwrap_or_default()
        .matches(&format!("\"{method} /v2/{repository}/manifests/"))
        .count()
}

fn log_len(registry: &Registry) -> usize {
    std::fs::read_to_string(registry.dir().join("registry.log"))
        .unwrap()
        .len()
}

#[tokio::test]
async fn private_images_rebuilt_tags_and_500_pods_ask_the_registry_only_what_they_must() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    let private = Registry::builder()
        .with_basic_auth("ocifit", "s3cret")
        .start()
        .await
        .unwrap();
    for namespace in [NAMESPACE, ELSEWHERE] {
        ocifit_testkit::create_namespace(&client, namespace)
            .await
            .unwrap();
    }
    // ocifit's own credentials for the private registry: used only where a policy opts in.
    let operator_config = tempfile::NamedTempFile::new().unwrap();
    let auth = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "ocifit:s3cret");
    std::fs::write(
        operator_config.path(),
        json!({"auths": {private.addr(): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    let registry = env.registry();
    let web = registry
        .push_multi_platform("shop/web", "v1", &["linux/amd64", "linux/arm64"])
        .await
        .unwrap();
    let served = placement::serve(
        &env,
        "placement-registry",
        &[
            "--plain-http-registry",
            private.addr(),
            "--registry-timeout",
            "2s",
            "--pull-secret-namespaces",
            NAMESPACE,
            "--placement-docker-config",
            operator_config.path().to_str().unwrap(),
        ],
    )
    .await;
    create_policy(&client, "default", json!({})).await;
    create_policy(
        &client,
        "trusting",
        json!({"priority": 10, "operatorCredentials": true,
               "podSelector": {"matchLabels": {"trust": "operator"}}}),
    )
    .await;
    served
        .gate(&client, "ocifit-placement", NAMESPACE, &web.reference)
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let create = async |pod: Pod| {
        pods.create(&PostParams::default(), &pod).await.unwrap();
    };

    // A private repository: read with the pod's pull Secret; without it, refused by name.
    let secret_image = private
        .push_image("private/app", "v1", "linux/arm64")
        .await
        .unwrap();
    for namespace in [NAMESPACE, ELSEWHERE] {
        Api::<Secret>::namespaced(client.clone(), namespace)
            .create(
                &PostParams::default(),
                &pull_secret("regcred", private.addr(), "ocifit", "s3cret"),
            )
            .await
            .unwrap();
    }
    let with_secret = |name: &str, namespace: &str| {
        let mut pod = placement::pod(
            name,
            namespace,
            json!({}),
            &[("app", &secret_image.reference)],
        );
        pod.spec.as_mut().unwrap().image_pull_secrets =
            Some(vec![k8s_openapi::api::core::v1::LocalObjectReference {
                name: "regcred".into(),
            }]);
        pod
    };
    create(with_secret("with-secret", NAMESPACE)).await;
    create(placement::pod(
        "without-secret",
        NAMESPACE,
        json!({}),
        &[("app", &secret_image.reference)],
    ))
    .await;
    let released = wait_pod(&pods, "with-secret", "released", |p| gates(p).is_empty()).await;
    assert_eq!(annotation(&released, PLATFORMS_ANNOTATION), "linux/arm64");
    // Without a pull Secret, under the default policy: ocifit holds credentials that read it, and
    // does not use them.
    let note = wait_event(
        &client,
        NAMESPACE,
        "Pod",
        "without-secret",
        "InspectionFailed",
    )
    .await;
    assert!(note.contains(&secret_image.reference), "{note}");
    assert!(note.to_lowercase().contains("unauthorized"), "{note}");
    // The same pod under the policy with `operatorCredentials: true`: read with ocifit's own.
    create(placement::pod(
        "operator-credentials",
        NAMESPACE,
        json!({"trust": "operator"}),
        &[("app", &secret_image.reference)],
    ))
    .await;
    let trusted = wait_pod(&pods, "operator-credentials", "released", |p| {
        gates(p).is_empty()
    })
    .await;
    assert_eq!(annotation(&trusted, PLATFORMS_ANNOTATION), "linux/arm64");

    // The same Secret in a namespace ocifit may not read Secrets in: not read, and the pod's Event
    // names the Secret and both ways to allow it; the image is then refused like one without.
    served
        .gate(
            &client,
            "ocifit-placement-elsewhere",
            ELSEWHERE,
            &web.reference,
        )
        .await;
    Api::<Pod>::namespaced(client.clone(), ELSEWHERE)
        .create(
            &PostParams::default(),
            &with_secret("secret-elsewhere", ELSEWHERE),
        )
        .await
        .unwrap();
    let note = wait_event(
        &client,
        ELSEWHERE,
        "Pod",
        "secret-elsewhere",
        "PullSecretUnusable",
    )
    .await;
    for words in [
        "regcred",
        ELSEWHERE,
        "pullSecrets.namespaces",
        "--placement-docker-config",
    ] {
        assert!(note.contains(words), "{words:?} in {note}");
    }
    let note = wait_event(
        &client,
        ELSEWHERE,
        "Pod",
        "secret-elsewhere",
        "InspectionFailed",
    )
    .await;
    assert!(note.to_lowercase().contains("unauthorized"), "{note}");

    // A tag rebuilt for another architecture: Always re-reads it, IfNotPresent keeps the digest
    // it read (tagCache.ifNotPresent: 24h) as the node would keep the image it pulled.
    registry
        .push_image("shop/rebuilt", "v1", "linux/amd64")
        .await
        .unwrap();
    let rebuilt = registry.reference("shop/rebuilt:v1");
    let with_policy = |name: &str, pull: &str| {
        let mut pod = placement::pod(name, NAMESPACE, json!({}), &[("app", &rebuilt)]);
        pod.spec.as_mut().unwrap().containers[0].image_pull_policy = Some(pull.into());
        pod
    };
    create(with_policy("before", "IfNotPresent")).await;
    let before = wait_pod(&pods, "before", "released", |p| gates(p).is_empty()).await;
    assert_eq!(annotation(&before, PLATFORMS_ANNOTATION), "linux/amd64");
    registry
        .push_image("shop/rebuilt", "v1", "linux/arm64")
        .await
        .unwrap();
    create(with_policy("if-not-present", "IfNotPresent")).await;
    let kept = wait_pod(&pods, "if-not-present", "released", |p| gates(p).is_empty()).await;
    assert_eq!(
        annotation(&kept, PLATFORMS_ANNOTATION),
        "linux/amd64",
        "the digest it read"
    );
    create(with_policy("always", "Always")).await;
    let always = wait_pod(&pods, "always", "released", |p| gates(p).is_empty()).await;
    assert_eq!(
        annotation(&always, PLATFORMS_ANNOTATION),
        "linux/arm64",
        "re-read"
    );

    // A container with imagePullPolicy: Never runs what its node has: its image is never asked
    // for (here, one no registry has), it constrains nothing, and a pod of such containers only
    // is released unconstrained.
    let offset = log_len(registry);
    let absent = registry.reference("shop/absent:v1");
    let never_pulled = |name: &str| Container {
        name: name.into(),
        image: Some(absent.clone()),
        image_pull_policy: Some("Never".into()),
        ..Container::default()
    };
    let mut beside = with_policy("never-beside", "IfNotPresent");
    beside
        .spec
        .as_mut()
        .unwrap()
        .containers
        .push(never_pulled("preloaded"));
    create(beside).await;
    let beside = wait_pod(&pods, "never-beside", "released", |p| gates(p).is_empty()).await;
    assert_eq!(annotation(&beside, OUTCOME_ANNOTATION), "Constrained");
    assert_eq!(
        annotation(&beside, PLATFORMS_ANNOTATION),
        "linux/arm64",
        "the tag's digest the Always pod re-read, and nothing of the Never container"
    );
    assert!(
        !annotation(&beside, DIGESTS_ANNOTATION).contains("preloaded"),
        "{beside:?}"
    );
    let mut only = with_policy("never-only", "Never");
    only.spec.as_mut().unwrap().containers[0] = never_pulled("app");
    create(only).await;
    let only = wait_pod(&pods, "never-only", "released", |p| gates(p).is_empty()).await;
    assert_eq!(annotation(&only, OUTCOME_ANNOTATION), "Unconstrained");
    assert!(
        annotation(&only, MESSAGE_ANNOTATION).contains("imagePullPolicy: Never"),
        "{only:?}"
    );
    assert_eq!(manifest_requests(registry, offset, "GET", "shop/absent"), 0);
    assert_eq!(
        manifest_requests(registry, offset, "HEAD", "shop/absent"),
        0
    );

    // 500 pods of 10 images: one tag lookup and one manifest request per image, not per pod.
    let mut images = Vec::new();
    for i in 0..10 {
        images.push(
            registry
                .push_multi_platform(
                    &format!("load/app{i}"),
                    "v1",
                    &["linux/amd64", "linux/arm64"],
                )
                .await
                .unwrap()
                .reference,
        );
    }
    let offset = log_len(registry);
    // 16 creations in flight, as a ReplicaSet controller would send them.
    let mut creating = tokio::task::JoinSet::new();
    for i in 0..500 {
        if creating.len() == 16 {
            creating.join_next().await.unwrap().unwrap();
        }
        let pods = pods.clone();
        let pod = placement::pod(
            &format!("load-{i}"),
            NAMESPACE,
            json!({"load": "yes"}),
            &[("app", &images[i % 10])],
        );
        creating.spawn(async move {
            pods.create(&PostParams::default(), &pod).await.unwrap();
        });
    }
    creating.join_all().await;
    let start = std::time::Instant::now();
    loop {
        let listed = pods
            .list(&ListParams::default().labels("load=yes"))
            .await
            .unwrap();
        let released = listed
            .items
            .iter()
            .filter(|p| gates(p).is_empty() && annotation(p, OUTCOME_ANNOTATION) == "Constrained")
            .count();
        if released == 500 {
            assert!(
                listed
                    .items
                    .iter()
                    .all(|p| p.metadata.labels.as_ref().unwrap()[POLICY_LABEL] == "default")
            );
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "{released} of 500 released"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    for i in 0..10 {
        let repository = format!("load/app{i}");
        let heads = manifest_requests(registry, offset, "HEAD", &repository);
        let gets = manifest_requests(registry, offset, "GET", &repository);
        assert_eq!(
            (heads, gets),
            (1, 1),
            "{repository}: HEAD (tag) and GET (index by digest)"
        );
    }
}
