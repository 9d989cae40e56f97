use serde_json::json;

use super::*;

fn cache(spec: serde_json::Value, status: Option<serde_json::Value>) -> ArtifactCache {
    let mut object = json!({
        "apiVersion": "ocifit.io/v1alpha1",
        "kind": "ArtifactCache",
        "metadata": {"name": "oras", "namespace": "workflow", "uid": "u", "generation": 3},
        "spec": spec
    });
    if let Some(status) = status {
        object["status"] = status;
    }
    serde_json::from_value(object).unwrap()
}

fn deployment(ready: i32, observed: i64, failing: Option<&str>) -> Deployment {
    let conditions = failing.map(|m| {
        json!([{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": m}])
    });
    serde_json::from_value(json!({
        "metadata": {"name": "oras-registry", "generation": 2},
        "status": {"readyReplicas": ready, "observedGeneration": observed, "conditions": conditions}
    }))
    .unwrap()
}

fn service(ip: Option<&str>) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "oras-registry"},
        "spec": {"clusterIP": ip}
    }))
    .unwrap()
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap())
}

fn deployed(
    cache: &ArtifactCache,
    deployment: &Deployment,
    service: &Service,
) -> ArtifactCacheStatus {
    let observed = Observed {
        deployment,
        service,
        pods: &[],
    };
    status(cache, Some(observed), Some(CREDENTIALS.into()), &now())
}

const CREDENTIALS: &str = "oras-registry-credentials-x7k2p";

fn ready(status: &ArtifactCacheStatus) -> (&str, &str, &str) {
    let c = &status.conditions[0];
    (c.type_.as_str(), c.status.as_str(), c.reason.as_str())
}

#[test]
fn a_ready_replica_behind_a_cluster_ip_is_available_at_that_ip() {
    let (d, s) = (deployment(1, 2, None), service(Some("10.0.0.7")));
    let status = deployed(&cache(json!({}), None), &d, &s);
    assert_eq!(status.endpoint.as_deref(), Some("10.0.0.7:5000"));
    assert!(status.plain_http);
    assert_eq!(status.observed_generation, Some(3));
    assert_eq!(ready(&status), ("Ready", "True", "Available"));
    assert_eq!(status.conditions[0].observed_generation, Some(3));
}

#[test]
fn no_ready_replica_or_an_old_generation_is_deploying_and_says_why() {
    let s = service(Some("10.0.0.7"));
    for d in [
        deployment(0, 2, Some("Deployment does not have minimum availability.")),
        deployment(1, 1, None),
    ] {
        let status = deployed(&cache(json!({}), None), &d, &s);
        assert_eq!(ready(&status), ("Ready", "False", "Deploying"));
        assert!(
            status.conditions[0]
                .message
                .contains("Deployment oras-registry has no ready replica"),
            "{}",
            status.conditions[0].message
        );
    }
    let d = deployment(0, 2, Some("Deployment does not have minimum availability."));
    let status = deployed(&cache(json!({}), None), &d, &s);
    assert!(
        status.conditions[0]
            .message
            .ends_with("does not have minimum availability.")
    );
}

#[test]
fn a_service_without_a_cluster_ip_is_pending_and_has_no_endpoint() {
    let d = deployment(1, 2, None);
    for ip in [None, Some(""), Some("None")] {
        let s = service(ip);
        let status = deployed(&cache(json!({}), None), &d, &s);
        assert_eq!(ready(&status), ("Ready", "False", "ServicePending"));
        assert_eq!(status.endpoint, None);
    }
}

#[test]
fn an_ipv6_cluster_ip_is_bracketed() {
    let (d, s) = (deployment(1, 2, None), service(Some("fd00::7")));
    let status = deployed(&cache(json!({}), None), &d, &s);
    assert_eq!(status.endpoint.as_deref(), Some("[fd00::7]:5000"));
}

#[test]
fn a_cache_with_htpasswd_that_is_not_ready_points_at_its_secret() {
    let (d, s) = (deployment(0, 2, None), service(Some("10.0.0.7")));
    let status = deployed(
        &cache(json!({"htpasswdSecretRef": {"name": "auth"}}), None),
        &d,
        &s,
    );
    assert_eq!(ready(&status), ("Ready", "False", "Deploying"));
    assert!(
        status.conditions[0]
            .message
            .contains("key htpasswd of the htpasswd Secret auth"),
        "{}",
        status.conditions[0].message
    );
}

#[test]
fn an_external_registry_is_ready_at_its_endpoint() {
    let status = status(
        &cache(
            json!({"deploy": false, "endpoint": "registry.example:5000", "plainHTTP": true}),
            None,
        ),
        None,
        None,
        &now(),
    );
    assert_eq!(ready(&status), ("Ready", "True", "External"));
    assert_eq!(status.endpoint.as_deref(), Some("registry.example:5000"));
    assert!(status.plain_http);
}

#[test]
fn the_transition_time_moves_only_when_readiness_changes() {
    let earlier = "2020-01-01T00:00:00Z";
    let before = json!({"observedGeneration": 3, "conditions": [{
        "type": "Ready", "status": "False", "reason": "Deploying", "message": "m",
        "lastTransitionTime": earlier
    }]});
    let (d, s) = (deployment(0, 2, None), service(Some("10.0.0.7")));
    let same = deployed(&cache(json!({}), Some(before.clone())), &d, &s);
    assert_eq!(
        serde_json::to_value(&same.conditions[0].last_transition_time).unwrap(),
        json!(earlier)
    );
    let d = deployment(1, 2, None);
    let changed = deployed(&cache(json!({}), Some(before)), &d, &s);
    assert_eq!(changed.conditions[0].last_transition_time, now());
}

#[test]
fn an_event_marks_each_change_of_readiness_or_reason_and_only_those() {
    let (d, s) = (deployment(1, 2, None), service(Some("10.0.0.7")));
    let available = deployed(&cache(json!({}), None), &d, &s);
    let first = change(None, &available).unwrap();
    assert_eq!(
        (first.reason, first.warning),
        (CacheReason::Available, false)
    );
    assert_eq!(change(Some(&available), &available), None);
    let d = deployment(0, 2, None);
    let down = deployed(&cache(json!({}), None), &d, &s);
    let lost = change(Some(&available), &down).unwrap();
    assert_eq!((lost.reason, lost.warning), (CacheReason::Deploying, true));
    let first_deploying = change(None, &down).unwrap();
    assert!(!first_deploying.warning, "not yet Ready is no warning");
}

#[test]
fn admission_sees_only_a_current_ready_status_as_ready() {
    assert_eq!(cache_state(None), CacheState::Missing);
    let (d, s) = (deployment(1, 2, None), service(Some("10.0.0.7")));
    let mut stored = cache(json!({}), None);
    assert!(matches!(
        cache_state(Some(&stored)),
        CacheState::NotReady { reason, stuck: false } if reason.contains("no status yet")
    ));
    stored.status = Some(deployed(&stored, &d, &s));
    assert_eq!(
        cache_state(Some(&stored)),
        CacheState::Ready {
            endpoint: "10.0.0.7:5000".into(),
            plain_http: true,
            credentials: Some(CREDENTIALS.into()),
        }
    );
    stored.metadata.generation = Some(4);
    assert!(matches!(
        cache_state(Some(&stored)),
        CacheState::NotReady { reason, stuck: false } if reason.contains("not caught up")
    ));
    stored.metadata.generation = Some(3);
    let d = deployment(0, 2, None);
    stored.status = Some(deployed(&stored, &d, &s));
    // Deploying, its Service addressed and its credentials made: steps are wired and held.
    assert!(matches!(
        cache_state(Some(&stored)),
        CacheState::Starting { endpoint, credentials: Some(credentials), reason, .. }
            if endpoint == "10.0.0.7:5000" && credentials == CREDENTIALS
                && reason.starts_with("Deploying: the registry's Deployment oras-registry")
    ));
}

#[test]
fn a_cache_whose_status_names_no_endpoint_or_credentials_yet_cannot_be_wired() {
    let (d, s) = (deployment(0, 2, None), service(Some("10.0.0.7")));
    let mut stored = cache(json!({}), None);
    let mut status = deployed(&stored, &d, &s);
    status.credentials_secret = None;
    stored.status = Some(status);
    assert!(matches!(
        cache_state(Some(&stored)),
        CacheState::NotReady { reason, stuck: false } if reason.starts_with("Deploying")
    ));
    let mut status = deployed(&stored, &d, &service(None));
    status.credentials_secret = Some(CREDENTIALS.into());
    stored.status = Some(status);
    assert!(matches!(
        cache_state(Some(&stored)),
        CacheState::NotReady { reason, stuck: false } if reason.starts_with("ServicePending")
    ));
}

#[test]
fn readiness_counts_what_admission_sees_as_ready() {
    let (d, s) = (deployment(1, 2, None), service(Some("10.0.0.7")));
    let mut ready = cache(json!({}), None);
    ready.status = Some(deployed(&ready, &d, &s));
    let mut behind = ready.clone();
    behind.metadata.generation = Some(4);
    let fresh = cache(json!({}), None);
    assert_eq!(count_ready([&ready, &behind, &fresh]), (1, 2));
    assert_eq!(count_ready([]), (0, 0));
}

#[test]
fn a_pod_the_replica_set_cannot_create_says_why_on_the_cache() {
    let forbidden = "pods \"oras-registry-5d9\" is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true";
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "oras-registry", "generation": 2},
        "status": {"observedGeneration": 2, "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."},
            {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": forbidden}
        ]}
    }))
    .unwrap();
    let s = service(Some("10.0.0.7"));
    let status = deployed(&cache(json!({}), None), &d, &s);
    assert_eq!(ready(&status), ("Ready", "False", "Deploying"));
    assert!(
        status.conditions[0].message.ends_with(forbidden),
        "{}",
        status.conditions[0].message
    );
}

#[test]
fn a_refused_cache_is_not_ready_has_no_endpoint_and_warns() {
    let (d, s) = (deployment(1, 2, None), service(Some("10.0.0.7")));
    let available = deployed(&cache(json!({}), None), &d, &s);
    let message =
        "the Service workflow/oras-registry exists and is not owned by this ArtifactCache";
    let conflict = refused(
        &cache(json!({}), None),
        CacheReason::Conflict,
        message.into(),
        Some(CREDENTIALS.into()),
        &now(),
    );
    assert_eq!(ready(&conflict), ("Ready", "False", "Conflict"));
    assert_eq!(conflict.conditions[0].message, message);
    assert_eq!(conflict.endpoint, None);
    assert_eq!(conflict.credentials_secret.as_deref(), Some(CREDENTIALS));
    let event = change(Some(&available), &conflict).unwrap();
    assert_eq!((event.reason, event.warning), (CacheReason::Conflict, true));
    let first = change(None, &conflict).unwrap();
    assert!(first.warning, "a refusal is a Warning from the start");
    let mut stored = cache(json!({}), None);
    stored.status = Some(conflict);
    assert!(matches!(
        cache_state(Some(&stored)),
        CacheState::NotReady { reason, stuck: true } if reason.starts_with("Conflict: the Service")
    ));
}

#[test]
fn a_registry_pod_that_cannot_start_says_why_on_the_cache() {
    let (d, s) = (deployment(0, 2, None), service(Some("10.0.0.7")));
    let pod = |reason: &str, message: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "oras-registry-7d4-x"},
            "status": {"containerStatuses": [{
                "name": "registry", "image": "r", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": message}}
            }]}
        }))
        .unwrap()
    };
    let stuck = [pod(
        "ImagePullBackOff",
        "Back-off pulling image \"registry.example/nope:1\"",
    )];
    let observed = Observed {
        deployment: &d,
        service: &s,
        pods: &stuck,
    };
    let status = status(&cache(json!({}), None), Some(observed), None, &now());
    assert_eq!(ready(&status), ("Ready", "False", "Deploying"));
    assert!(
        status.conditions[0].message.ends_with(
            "; its pod oras-registry-7d4-x: container registry is waiting: ImagePullBackOff: Back-off pulling image \"registry.example/nope:1\""
        ),
        "{}",
        status.conditions[0].message
    );
    let starting = [pod("ContainerCreating", "")];
    let observed = Observed {
        pods: &starting,
        ..observed
    };
    let status = super::status(&cache(json!({}), None), Some(observed), None, &now());
    assert!(
        status.conditions[0]
            .message
            .ends_with("has no ready replica yet"),
        "{}",
        status.conditions[0].message
    );
}

fn running_unready_pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "oras-registry-7d9-abcde"},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "registry", "image": "registry", "imageID": "", "restartCount": 0,
            "ready": false, "state": {"running": {}}
        }]}
    }))
    .unwrap()
}

fn s3_spec() -> serde_json::Value {
    json!({"storage": {"s3": {
        "bucket": "artifacts", "endpoint": "http://10.1.2.3:8333",
        "credentialsSecretRef": {"name": "store-keys"}
    }}})
}

fn with_pods(cache: &ArtifactCache, pods: &[Pod]) -> ArtifactCacheStatus {
    let (d, s) = (deployment(0, 2, None), service(Some("10.0.0.7")));
    let observed = Observed {
        deployment: &d,
        service: &s,
        pods,
    };
    status(cache, Some(observed), Some(CREDENTIALS.into()), &now())
}

#[test]
fn an_s3_registry_running_unready_says_its_bucket_does_not_answer() {
    let status = with_pods(&cache(s3_spec(), None), &[running_unready_pod()]);
    assert_eq!(ready(&status), ("Ready", "False", "StorageUnavailable"));
    let message = &status.conditions[0].message;
    assert!(
        message.contains("bucket artifacts at http://10.1.2.3:8333 does not answer"),
        "{message}"
    );
    assert!(message.contains("oras-registry-7d9-abcde"), "{message}");
    // Not stuck: steps are held until the store answers, not refused.
    let mut cache = cache(s3_spec(), Some(serde_json::to_value(&status).unwrap()));
    cache.metadata.generation = Some(3);
    assert!(matches!(
        cache_state(Some(&cache)),
        CacheState::Starting { .. }
    ));
}

#[test]
fn a_volume_registry_running_unready_is_only_deploying() {
    let status = with_pods(&cache(json!({}), None), &[running_unready_pod()]);
    assert_eq!(ready(&status), ("Ready", "False", "Deploying"));
}

#[test]
fn the_status_names_the_storage_in_use() {
    let (d, s) = (deployment(1, 2, None), service(Some("10.0.0.7")));
    let claim = json!({"storage": {"persistentVolumeClaim": {"size": "1Gi"}}});
    for (spec, storage) in [
        (json!({}), Some("emptyDir")),
        (claim, Some("persistentVolumeClaim")),
        (s3_spec(), Some("s3")),
        (json!({"deploy": false, "endpoint": "r.example.com"}), None),
    ] {
        let status = deployed(&cache(spec, None), &d, &s);
        assert_eq!(status.storage.as_deref(), storage);
    }
}
