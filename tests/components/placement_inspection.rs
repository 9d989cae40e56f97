//! Image inspection for platform placement against a real registry (distribution, started by the
//! test kit), with images pushed by crane and regctl as users push them: multi-platform indexes,
//! single-platform images known only from their config blob, indexes with attestation entries,
//! a private registry read with a pod's pull Secret. The registry's access log counts every
//! request, so "answered from the cache" is checked where it matters: on the wire.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::collections::BTreeMap;
use std::time::Duration;

use ocifit::placement::PullSecrets;
use ocifit::placement::{ContainerImage, intersect};
use ocifit::registry::{
    BackoffPolicy, Credentials, ErrorKind, ImageFacts, InspectError, Inspector, InspectorOptions,
    Lookup, Platform, PrivateRegistries, Reference, RegistryOptions, RetryPolicy, parse_reference,
};
use ocifit_testkit::Registry as TestRegistry;
use ocifit_testkit::{PushedImage, pull_secret};

const LONG: Duration = Duration::from_secs(86_400);

fn inspector(registry: &TestRegistry) -> Inspector {
    Inspector::new(InspectorOptions {
        registry: RegistryOptions {
            plain_http: vec![registry.addr().to_string()],
            // The test kit's registry is on loopback.
            private: PrivateRegistries::parse(&[registry.addr()]).unwrap(),
            ..RegistryOptions::default()
        },
        ..InspectorOptions::default()
    })
}

/// A registry holding `shop/web:v1` for linux/amd64.
async fn registry_with_web() -> (TestRegistry, PushedImage) {
    let registry = TestRegistry::builder().start().await.unwrap();
    let image = registry
        .push_image("shop/web", "v1", "linux/amd64")
        .await
        .unwrap();
    (registry, image)
}

fn names(platforms: &[Platform]) -> Vec<String> {
    let mut names: Vec<String> = platforms.iter().map(ToString::to_string).collect();
    names.sort();
    names
}

async fn inspect(
    inspector: &Inspector,
    image: &Reference,
    max_tag_age: Duration,
    credentials: &[Credentials],
) -> Result<ImageFacts, InspectError> {
    inspector
        .inspect(Lookup {
            image,
            max_tag_age,
            credentials,
            namespace: "default",
        })
        .await
}

async fn platforms_of(inspector: &Inspector, image: &str) -> Vec<String> {
    let reference = parse_reference(image).unwrap();
    let facts = inspect(inspector, &reference, LONG, &[]).await.unwrap();
    names(&facts.platforms)
}

fn log_len(registry: &TestRegistry) -> usize {
    std::fs::read_to_string(registry.dir().join("registry.log"))
        .unwrap()
        .len()
}

/// The registry's access log from `offset` on.
fn access_log(registry: &TestRegistry, offset: usize) -> String {
    let log = std::fs::read_to_string(registry.dir().join("registry.log")).unwrap();
    log.get(offset..).unwrap_or_default().to_string()
}

/// How many `METHOD /v2/<repository>/<kind>/` requests the log holds.
fn requests(log: &str, method: &str, repository: &str, kind: &str) -> usize {
    log.matches(&format!("\"{method} /v2/{repository}/{kind}/"))
        .count()
}

#[tokio::test]
async fn indexes_single_platform_images_and_attestations_give_the_platforms_nodes_can_run() {
    let registry = TestRegistry::builder().start().await.unwrap();
    let multi = registry
        .push_multi_platform("shop/web", "v1", &["linux/amd64", "linux/arm64/v8"])
        .await
        .unwrap();
    let single = registry
        .push_image("shop/metrics", "v1", "linux/arm64")
        .await
        .unwrap();
    let attested = registry
        .push_index_with_attestation("shop/proxy", "v1", &["linux/amd64", "linux/s390x"])
        .await
        .unwrap();
    let inspector = inspector(&registry);

    assert_eq!(
        platforms_of(&inspector, &multi.reference).await,
        ["linux/amd64", "linux/arm64/v8"]
    );
    assert_eq!(
        platforms_of(&inspector, &single.reference).await,
        ["linux/arm64"],
        "read from the config blob"
    );
    assert_eq!(
        platforms_of(&inspector, &attested.reference).await,
        ["linux/amd64", "linux/s390x"],
        "the unknown/unknown attestation entry is not a platform"
    );

    // An arm64-only sidecar beside the multi-platform main container: arm64 only.
    let owned: Vec<(&str, Vec<Platform>)> = {
        let mut owned = Vec::new();
        for (name, image) in [("web", &multi.reference), ("metrics", &single.reference)] {
            let reference = parse_reference(image).unwrap();
            let facts = inspect(&inspector, &reference, LONG, &[]).await.unwrap();
            owned.push((name, facts.platforms.as_ref().clone()));
        }
        owned
    };
    let images: Vec<ContainerImage<'_>> = owned
        .iter()
        .map(|(name, platforms)| ContainerImage { name, platforms })
        .collect();
    assert_eq!(intersect(&images).unwrap().to_string(), "linux/arm64");
}

#[tokio::test]
async fn five_hundred_lookups_of_ten_images_make_one_request_of_each_kind_per_image() {
    let registry = TestRegistry::builder().start().await.unwrap();
    let mut images = Vec::new();
    for index in 0..10 {
        let platform = if index % 2 == 0 {
            "linux/amd64"
        } else {
            "linux/arm64"
        };
        images.push(
            registry
                .push_image(&format!("load/app{index}"), "v1", platform)
                .await
                .unwrap(),
        );
    }
    let inspector = inspector(&registry);
    let offset = log_len(&registry);

    let mut lookups = tokio::task::JoinSet::new();
    for round in 0..50 {
        for image in &images {
            let inspector = inspector.clone();
            let reference = parse_reference(&image.reference).unwrap();
            lookups.spawn(async move {
                // Half of them arrive together, half after the first answers are cached.
                if round >= 25 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                inspect(&inspector, &reference, LONG, &[]).await
            });
        }
    }
    let mut answered = 0;
    while let Some(result) = lookups.join_next().await {
        result.unwrap().unwrap();
        answered += 1;
    }
    assert_eq!(answered, 500);

    let log = access_log(&registry, offset);
    for index in 0..10 {
        let repository = format!("load/app{index}");
        assert_eq!(
            requests(&log, "HEAD", &repository, "manifests"),
            1,
            "{repository}: one tag resolution\n{log}"
        );
        assert_eq!(
            requests(&log, "GET", &repository, "manifests"),
            1,
            "{repository}: one manifest request per digest\n{log}"
        );
        assert_eq!(
            requests(&log, "GET", &repository, "blobs"),
            1,
            "{repository}: one config blob\n{log}"
        );
    }
    let stats = inspector.stats();
    assert_eq!(stats.tag_misses, 10);
    assert_eq!(stats.platform_misses, 10);
    assert_eq!(stats.tag_hits + stats.tag_misses, 500);
}

#[tokio::test]
async fn a_rebuilt_tag_is_seen_at_once_under_always_and_after_its_lifetime_under_if_not_present() {
    let (registry, first) = registry_with_web().await;
    let inspector = inspector(&registry);
    let reference = parse_reference(&first.reference).unwrap();
    let look = |max_tag_age| {
        let inspector = inspector.clone();
        let reference = reference.clone();
        async move {
            inspect(&inspector, &reference, max_tag_age, &[])
                .await
                .unwrap()
        }
    };
    assert_eq!(look(LONG).await.digest, first.digest);

    let rebuilt = registry
        .push_image("shop/web", "v1", "linux/arm64")
        .await
        .unwrap();
    assert_ne!(rebuilt.digest, first.digest);

    let if_not_present = look(LONG).await;
    assert_eq!(
        if_not_present.digest, first.digest,
        "IfNotPresent trusts the tag"
    );
    assert_eq!(names(&if_not_present.platforms), ["linux/amd64"]);
    let offset = log_len(&registry);
    let always = look(Duration::ZERO).await;
    assert_eq!(always.digest, rebuilt.digest, "Always re-resolves the tag");
    assert_eq!(names(&always.platforms), ["linux/arm64"]);
    let log = access_log(&registry, offset);
    assert_eq!(requests(&log, "HEAD", "shop/web", "manifests"), 1, "{log}");

    // Once re-resolved, the new digest is what IfNotPresent lookups see too.
    assert_eq!(look(LONG).await.digest, rebuilt.digest);
    // And the old digest's platforms are still known without a request.
    let offset = log_len(&registry);
    let old = parse_reference(&first.by_digest()).unwrap();
    let facts = inspect(&inspector, &old, LONG, &[]).await.unwrap();
    assert_eq!(names(&facts.platforms), ["linux/amd64"]);
    assert_eq!(access_log(&registry, offset), "", "answered from memory");
}

#[tokio::test]
async fn an_image_forgotten_after_an_exec_format_error_is_inspected_afresh_for_the_next_pod() {
    let (registry, first) = registry_with_web().await;
    let inspector = inspector(&registry);
    let reference = parse_reference(&first.reference).unwrap();
    assert_eq!(
        inspect(&inspector, &reference, LONG, &[])
            .await
            .unwrap()
            .digest,
        first.digest
    );
    let cached = inspector.cached_platforms(&reference, &first.digest).await;
    assert_eq!(names(&cached.unwrap()), ["linux/amd64"], "what ocifit knew");
    let moved = registry
        .push_image("shop/web", "v1", "linux/arm64")
        .await
        .unwrap();
    assert_eq!(
        inspect(&inspector, &reference, LONG, &[])
            .await
            .unwrap()
            .digest,
        first.digest,
        "IfNotPresent trusts the cached tag"
    );

    assert_eq!(inspector.forget(&reference, &[&first.digest]).await, 2);
    assert!(
        inspector
            .cached_platforms(&reference, &first.digest)
            .await
            .is_none()
    );
    let offset = log_len(&registry);
    let fresh = inspect(&inspector, &reference, LONG, &[]).await.unwrap();
    assert_eq!(fresh.digest, moved.digest, "the tag is resolved again");
    assert_eq!(names(&fresh.platforms), ["linux/arm64"]);
    let log = access_log(&registry, offset);
    assert_eq!(requests(&log, "HEAD", "shop/web", "manifests"), 1, "{log}");
}

#[tokio::test]
async fn a_private_image_is_read_with_the_pods_pull_secret_after_a_wrong_one_is_refused() {
    let password = "s3cret-placement";
    let registry = TestRegistry::builder()
        .with_basic_auth("ocifit", password)
        .start()
        .await
        .unwrap();
    let image = registry
        .push_image("private/app", "v1", "linux/arm64")
        .await
        .unwrap();
    let reference = parse_reference(&image.reference).unwrap();
    let inspector = inspector(&registry);

    let anonymous = inspect(&inspector, &reference, LONG, &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&anonymous, InspectError::Registry(err) if err.kind() == ErrorKind::Unauthorized),
        "{anonymous}"
    );
    assert!(
        anonymous.to_string().contains(registry.addr()),
        "{anonymous}"
    );

    let secrets = BTreeMap::from([
        (
            "stale".to_owned(),
            pull_secret("stale", registry.addr(), "ocifit", "old-password"),
        ),
        (
            "regcred".to_owned(),
            pull_secret("regcred", registry.addr(), "ocifit", password),
        ),
    ]);
    // The pod names "stale" first, its ServiceAccount names "regcred".
    let pull = PullSecrets::read(["stale", "regcred"], &secrets);
    let credentials = pull.for_image(&reference, None);
    assert_eq!(credentials.len(), 2);
    let facts = inspect(&inspector, &reference, LONG, &credentials)
        .await
        .unwrap();
    assert_eq!(facts.digest, image.digest);
    assert_eq!(names(&facts.platforms), ["linux/arm64"]);

    // The anonymous lookup's scope never learns the tag from the credentialed one.
    let again = inspect(&inspector, &reference, LONG, &[]).await;
    assert!(again.is_err(), "answered a pod without credentials");
}

#[tokio::test]
async fn a_registry_that_stops_answering_is_left_alone_then_used_again_once_it_is_back() {
    let (registry, image) = registry_with_web().await;
    let reference = parse_reference(&image.reference).unwrap();
    let inspector = Inspector::new(InspectorOptions {
        registry: RegistryOptions {
            plain_http: vec![registry.addr().to_string()],
            request_timeout: Duration::from_millis(500),
            retry: RetryPolicy {
                max_attempts: 1,
                ..RetryPolicy::default()
            },
            private: PrivateRegistries::parse(&[registry.addr()]).unwrap(),
            ..RegistryOptions::default()
        },
        backoff: BackoffPolicy {
            first: Duration::from_millis(300),
            max: Duration::from_secs(1),
        },
        ..InspectorOptions::default()
    });
    let look = || inspect(&inspector, &reference, Duration::ZERO, &[]);

    registry.pause().unwrap();
    let down = look().await.unwrap_err();
    assert!(
        matches!(&down, InspectError::Registry(err) if err.kind() == ErrorKind::Transport),
        "{down}"
    );
    let cooling = look().await.unwrap_err();
    assert!(
        matches!(cooling, InspectError::BackingOff { .. }),
        "{cooling}"
    );
    assert!(cooling.to_string().contains("failed recently"), "{cooling}");
    assert_eq!(inspector.stats().backed_off, 1);

    registry.resume().unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let back = look().await.unwrap();
    assert_eq!(back.digest, image.digest);
    assert_eq!(names(&back.platforms), ["linux/amd64"]);
}

#[tokio::test]
async fn a_silent_registry_of_one_namespace_leaves_slots_to_the_others_and_its_lookups_end_by_the_deadline()
 {
    let (registry, image) = registry_with_web().await;
    let (silent, mut held) = ocifit_testkit::silent_server()
        .await
        .expect("a silent server");
    let inspector = Inspector::new(InspectorOptions {
        registry: RegistryOptions {
            plain_http: vec![registry.addr().to_string(), silent.clone()],
            private: PrivateRegistries::parse(&[registry.addr(), silent.as_str()]).unwrap(),
            ..RegistryOptions::default()
        },
        lookup_deadline: Duration::from_secs(10),
        ..InspectorOptions::default()
    });
    let defaults = InspectorOptions::default();
    // Namespace "stalled": more lookups on the silent registry than the inspector has slots.
    let stalled: Vec<_> = (0..12)
        .map(|i| {
            let inspector = inspector.clone();
            let reference = parse_reference(&format!("{silent}/tenant/app-{i}:v1")).unwrap();
            tokio::spawn(async move {
                inspector
                    .inspect(Lookup {
                        image: &reference,
                        max_tag_age: LONG,
                        credentials: &[],
                        namespace: "stalled",
                    })
                    .await
            })
        })
        .collect();
    held.wait_for(|held| *held >= defaults.max_per_namespace)
        .await
        .unwrap();

    // Namespace "other", with a registry that answers: answered while every stalled lookup waits.
    let good = parse_reference(&image.reference).unwrap();
    let answered = inspector
        .inspect(Lookup {
            image: &good,
            max_tag_age: LONG,
            credentials: &[],
            namespace: "other",
        })
        .await
        .unwrap();
    assert_eq!(answered.digest, image.digest);
    let waiting = stalled.iter().filter(|task| !task.is_finished()).count();
    let connections = *held.borrow();
    eprintln!(
        "silent registry: {connections} connection(s) held by one namespace of {} lookups; the \
         other namespace answered with {waiting} still waiting",
        stalled.len()
    );
    assert_eq!(
        waiting,
        stalled.len(),
        "answered only after a stalled lookup ended"
    );
    assert_eq!(
        connections, defaults.max_per_namespace,
        "one namespace holds at most its own slots"
    );

    // Every stalled lookup ends, by the deadline, as a failure its pod counts.
    for task in stalled {
        let failed = task.await.unwrap().unwrap_err();
        assert!(
            failed
                .to_string()
                .contains("within the lookup deadline of 10s"),
            "{failed}"
        );
    }
}

#[tokio::test]
async fn a_registry_on_a_loopback_address_is_refused_unless_listed_before_any_request() {
    let (registry, image) = registry_with_web().await;
    let reference = parse_reference(&image.reference).unwrap();
    let refusing = Inspector::new(InspectorOptions {
        registry: RegistryOptions {
            plain_http: vec![registry.addr().to_string()],
            ..RegistryOptions::default()
        },
        ..InspectorOptions::default()
    });
    let offset = log_len(&registry);
    let refused = inspect(&refusing, &reference, LONG, &[]).await.unwrap_err();
    assert!(
        matches!(&refused, InspectError::Registry(err) if err.kind() == ErrorKind::NotAllowed),
        "{refused}"
    );
    assert_eq!(
        refused.summary(),
        "refused: the host's address is private, loopback, link-local or reserved (allowed only \
         by --allowed-private-registries)"
    );
    assert_eq!(
        access_log(&registry, offset)
            .matches("/v2/shop/web/")
            .count(),
        0,
        "nothing was sent to it"
    );

    // A name that resolves to loopback is refused the same way.
    let port = registry.addr().rsplit_once(':').unwrap().1;
    let by_name = parse_reference(&format!("localhost:{port}/shop/web:v1")).unwrap();
    let refused = inspect(&refusing, &by_name, LONG, &[]).await.unwrap_err();
    assert!(refused.summary().starts_with("refused: "), "{refused}");

    assert_eq!(
        platforms_of(&inspector(&registry), &image.reference).await,
        ["linux/amd64"],
        "listed"
    );
}
