use serde_json::json;

use super::*;

const WIRED: &str = "10.0.0.17:5000";
const FAIL: HoldRules = HoldRules {
    bound: Duration::from_secs(300),
    failure: HoldFailure::Fail,
};
const IGNORE: HoldRules = HoldRules {
    bound: Duration::from_secs(300),
    failure: HoldFailure::Ignore,
};

/// A step held by the cache's gate (behind another gate), wired to `oras` at [`WIRED`].
fn held() -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "step-1", "namespace": "workflow", "resourceVersion": "41",
            "labels": {"artifacts.ocifit.io/step": "injected", "artifacts.ocifit.io/held": "true"},
            "annotations": {"artifacts.ocifit.io/injected": format!("ArtifactCache oras at {WIRED}")}
        },
        "spec": {
            "containers": [{"name": "step"}],
            "schedulingGates": [{"name": "example.com/quota"}, {"name": "artifacts.ocifit.io/cache"}]
        }
    }))
    .unwrap()
}

fn ready_at(endpoint: &str) -> CacheState {
    CacheState::Ready {
        endpoint: endpoint.into(),
        plain_http: true,
        credentials: Some("oras-registry-credentials-x7k2p".into()),
    }
}

fn starting() -> CacheState {
    CacheState::Starting {
        endpoint: WIRED.into(),
        plain_http: true,
        credentials: Some("oras-registry-credentials-x7k2p".into()),
        reason: "Deploying: the registry's Deployment oras-registry has no ready replica yet"
            .into(),
    }
}

/// The pod after the release's patch.
fn applied(pod: &Pod, release: &Release) -> Pod {
    let mut value = serde_json::to_value(pod).unwrap();
    json_patch::patch(&mut value, release.patch.as_ref().unwrap()).unwrap();
    serde_json::from_value(value).unwrap()
}

fn gates(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .unwrap()
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.clone())
        .collect()
}

#[test]
fn a_cache_ready_where_the_step_was_wired_releases_it_with_an_event() {
    let pod = held();
    let release = release(&pod, &ready_at(WIRED), FAIL, Duration::from_secs(20));
    let released = applied(&pod, &release);
    assert_eq!(gates(&released), ["example.com/quota"], "only ours removed");
    let labels = released.metadata.labels.unwrap();
    assert!(!labels.contains_key(step::HELD_LABEL));
    assert_eq!(labels[step::STEP_LABEL], "injected");
    let event = release.event.unwrap();
    assert_eq!((event.warning, event.reason), (false, "CacheReady"));
    assert_eq!(
        event.note,
        "released from scheduling gate artifacts.ocifit.io/cache: ArtifactCache oras is Ready at 10.0.0.17:5000"
    );
}

#[test]
fn a_cache_still_starting_within_the_bound_keeps_the_step_for_the_rest_of_it() {
    let release = release(&held(), &starting(), FAIL, Duration::from_secs(20));
    assert_eq!(
        release,
        Release {
            patch: None,
            event: None,
            wait: Some(Duration::from_secs(280)),
        }
    );
}

#[test]
fn past_the_bound_rule_fail_keeps_the_step_held_saying_why_once() {
    let pod = held();
    let release = release(&pod, &starting(), FAIL, Duration::from_secs(301));
    let kept = applied(&pod, &release);
    assert_eq!(gates(&kept), ["example.com/quota", step::CACHE_GATE]);
    let why = &kept.metadata.annotations.as_ref().unwrap()[step::HELD_ANNOTATION];
    assert_eq!(
        why,
        "ArtifactCache oras is not Ready within 300s: Deploying: the registry's Deployment oras-registry has no ready replica yet"
    );
    let event = release.event.unwrap();
    assert_eq!((event.warning, event.reason), (true, "HeldCacheNotReady"));
    assert!(
        event.note.contains("hold failure rule Fail"),
        "{}",
        event.note
    );
    // Looked at again with the same reason: nothing more to write or say.
    assert_eq!(
        super::release(&kept, &starting(), FAIL, Duration::from_secs(400)),
        Release::default()
    );
    // The cache Ready after all: released, the annotation gone.
    let late = super::release(&kept, &ready_at(WIRED), FAIL, Duration::from_secs(900));
    let released = applied(&kept, &late);
    assert_eq!(gates(&released), ["example.com/quota"]);
    assert!(
        !released
            .metadata
            .annotations
            .unwrap()
            .contains_key(step::HELD_ANNOTATION)
    );
}

#[test]
fn past_the_bound_rule_ignore_releases_the_step_with_a_warning() {
    let pod = held();
    let release = release(&pod, &starting(), IGNORE, Duration::from_secs(301));
    assert_eq!(gates(&applied(&pod, &release)), ["example.com/quota"]);
    let event = release.event.unwrap();
    assert_eq!(
        (event.warning, event.reason),
        (true, "ReleasedCacheNotReady")
    );
    assert!(
        event
            .note
            .starts_with("ArtifactCache oras is not Ready within 300s"),
        "{}",
        event.note
    );
}

#[test]
fn a_cache_that_cannot_become_ready_fails_its_steps_at_once_with_its_reason() {
    let stuck = CacheState::NotReady {
        reason: "ImageNotAllowed: image example.com/registry:2 is not one ocifit deploys".into(),
        stuck: true,
    };
    let release = release(&held(), &stuck, FAIL, Duration::from_secs(1));
    let event = release.event.unwrap();
    assert_eq!(event.reason, "HeldCacheNotReady");
    assert!(
        event.note.starts_with(
            "ArtifactCache oras cannot become Ready: ImageNotAllowed: image example.com/registry:2"
        ),
        "{}",
        event.note
    );
}

#[test]
fn a_cache_deleted_or_serving_elsewhere_fails_its_steps_at_once() {
    let gone = release(&held(), &CacheState::Missing, FAIL, Duration::from_secs(1));
    assert!(
        gone.event
            .unwrap()
            .note
            .starts_with("ArtifactCache oras no longer exists")
    );
    let moved = release(
        &held(),
        &ready_at("10.0.0.99:5000"),
        FAIL,
        Duration::from_secs(1),
    );
    let note = moved.event.unwrap().note;
    assert!(
        note.starts_with("ArtifactCache oras is Ready at 10.0.0.99:5000, not at 10.0.0.17:5000"),
        "{note}"
    );
}

#[test]
fn a_pod_no_longer_behind_the_gate_is_left_alone() {
    let mut pod = held();
    pod.spec.as_mut().unwrap().scheduling_gates = None;
    assert_eq!(
        release(&pod, &ready_at(WIRED), FAIL, Duration::from_secs(1)),
        Release::default()
    );
}

#[test]
fn the_watch_keeps_what_the_release_reads_and_its_patch_leaves_the_rest_of_the_pod_alone() {
    let mut whole = serde_json::to_value(held()).unwrap();
    whole["metadata"]["labels"]["team"] = json!("kitchen");
    whole["metadata"]["annotations"]["notes"] = json!("x".repeat(64 * 1024));
    whole["spec"]["containers"] = json!([{
        "name": "step", "image": "busybox", "args": ["y".repeat(64 * 1024)],
        "env": [{"name": "BIG", "value": "z".repeat(64 * 1024)}]
    }]);
    let whole: Pod = serde_json::from_value(whole).unwrap();
    let mut trimmed = whole.clone();
    crate::cluster::trim(&mut trimmed, &KEPT);
    let kept = serde_json::to_string(&trimmed).unwrap();
    assert!(kept.len() < 1024, "{kept}");
    assert_eq!(
        trimmed
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        [step::HELD_LABEL, step::STEP_LABEL]
    );
    assert_eq!(gates(&trimmed), ["example.com/quota", step::CACHE_GATE]);
    assert_eq!(wired_to(&trimmed), Some(("oras", WIRED)));
    // Decided on the trimmed copy, applied to the whole pod: only the hold goes.
    let release = release(&trimmed, &ready_at(WIRED), FAIL, Duration::from_secs(1));
    let released = applied(&whole, &release);
    assert_eq!(gates(&released), ["example.com/quota"]);
    assert_eq!(
        released.metadata.labels.as_ref().unwrap()["team"],
        "kitchen"
    );
    assert_eq!(
        released.spec.as_ref().unwrap().containers,
        whole.spec.as_ref().unwrap().containers
    );
    assert_eq!(
        released.metadata.annotations.as_ref().unwrap()["notes"].len(),
        64 * 1024
    );
}
