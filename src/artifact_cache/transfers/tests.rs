use k8s_openapi::api::core::v1::Container;
use serde_json::json;

use super::*;
use crate::step_helper::Direction;

fn report(direction: Direction, bytes: u64) -> String {
    let mut report = Report::new(direction);
    report.moved([bytes], std::time::Duration::from_millis(250));
    report.message()
}

const HELPER: &str = "ghcr.io/ocifit/ocifit:1";

fn pod(statuses: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "step-1", "namespace": "workflow", "uid": "u1",
            "annotations": {step::INJECTED: "ArtifactCache oras at 10.0.0.1:5000"}
        },
        "spec": {
            "containers": [{"name": "step", "image": "busybox"}],
            "initContainers": [
                {"name": PREPARE, "image": HELPER}, {"name": PUSH, "image": HELPER}
            ]
        },
        "status": {"initContainerStatuses": statuses}
    }))
    .unwrap()
}

fn cache(namespace: &str, name: &str, endpoint: &str) -> Arc<ArtifactCache> {
    let mut cache = ArtifactCache::new(name, serde_json::from_value(json!({})).unwrap());
    cache.metadata.namespace = Some(namespace.into());
    cache.status = Some(crate::api::ArtifactCacheStatus {
        endpoint: Some(endpoint.into()),
        ..Default::default()
    });
    Arc::new(cache)
}

fn store(namespace: &str, name: &str) -> Option<Arc<ArtifactCache>> {
    (namespace == "workflow" && name == "oras").then(|| cache("workflow", "oras", "10.0.0.1:5000"))
}

fn facts() -> Facts<'static> {
    Facts {
        helper_image: HELPER,
        cache: &store,
    }
}

fn terminated(id: &str, message: &str) -> serde_json::Value {
    json!({"terminated": {"exitCode": 0, "containerID": id, "message": message}})
}

#[test]
fn each_helper_run_is_counted_once_across_resyncs_and_restarts() {
    let running = pod(json!([
        {"name": PREPARE, "image": "o", "imageID": "", "ready": false, "restartCount": 0,
         "state": terminated("c://1", &report(Direction::Pull, 42))},
        {"name": PUSH, "image": "o", "imageID": "", "ready": true, "restartCount": 0,
         "state": {"running": {}}}
    ]));
    let mut tally = Tally::default();
    let first = tally.new_runs(&running, &facts());
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].cache, "workflow/oras");
    assert_eq!(first[0].report.bytes, 42);
    assert_eq!(
        tally.new_runs(&running, &facts()),
        [],
        "a resync counts nothing again"
    );
    let restarted_pusher = pod(json!([
        {"name": PREPARE, "image": "o", "imageID": "", "ready": false, "restartCount": 0,
         "state": terminated("c://1", &report(Direction::Pull, 42))},
        {"name": PUSH, "image": "o", "imageID": "", "ready": false, "restartCount": 1,
         "lastState": terminated("c://2", &report(Direction::Push, 7)),
         "state": terminated("c://3", &report(Direction::Push, 9))}
    ]));
    let pushes: Vec<u64> = tally
        .new_runs(&restarted_pusher, &facts())
        .iter()
        .map(|run| run.report.bytes)
        .collect();
    assert_eq!(pushes, [7, 9], "each run of a restarted container, once");
    assert_eq!(tally.new_runs(&restarted_pusher, &facts()), []);
    tally.keep_only(&BTreeSet::from(["u1".to_string()]));
    assert_eq!(
        tally.new_runs(&restarted_pusher, &facts()),
        [],
        "still listed, still seen"
    );
    tally.keep_only(&BTreeSet::new());
    assert!(
        tally.seen.is_empty(),
        "a pod a relist no longer returns is forgotten"
    );
    tally.new_runs(&restarted_pusher, &facts());
    tally.forget(&restarted_pusher);
    assert!(tally.seen.is_empty(), "a pod gone is forgotten");
}

#[test]
fn a_message_that_is_no_report_and_a_registry_step_are_read_as_such() {
    let mut plain = pod(json!([
        {"name": PREPARE, "image": "o", "imageID": "", "ready": false, "restartCount": 0,
         "state": terminated("c://1", "failed to pull input a:1")}
    ]));
    assert_eq!(finished(&plain, &facts()), []);
    plain.metadata.annotations = Some(
        [(
            step::INJECTED.to_string(),
            "registry 10.0.0.9:5000".to_string(),
        )]
        .into(),
    );
    plain.status = pod(json!([
        {"name": PREPARE, "image": "o", "imageID": "", "ready": false, "restartCount": 0,
         "state": terminated("c://1", &report(Direction::Pull, 1))}
    ]))
    .status;
    assert_eq!(finished(&plain, &facts())[0].cache, "");
}

fn pulled() -> Pod {
    pod(json!([
        {"name": PREPARE, "image": HELPER, "imageID": "", "ready": false, "restartCount": 0,
         "state": terminated("c://1", &report(Direction::Pull, 1_000_000_000_000))}
    ]))
}

#[test]
fn a_forged_step_pod_is_not_counted_nor_remembered() {
    assert_eq!(
        finished(&pulled(), &facts()).len(),
        1,
        "the genuine pod counts"
    );
    let mut no_cache = pulled();
    let long = "x".repeat(250);
    no_cache.metadata.annotations = Some(
        [(
            step::INJECTED.into(),
            format!("ArtifactCache {long} at 10.0.0.1:5000"),
        )]
        .into(),
    );
    let mut other_endpoint = pulled();
    other_endpoint.metadata.annotations = Some(
        [(
            step::INJECTED.into(),
            "ArtifactCache oras at 10.6.6.6:5000".into(),
        )]
        .into(),
    );
    let mut other_image = pulled();
    if let Some(spec) = other_image.spec.as_mut() {
        spec.init_containers = Some(vec![Container {
            name: PREPARE.into(),
            image: Some("attacker/helper:1".into()),
            ..Container::default()
        }]);
    }
    let mut not_a_helper = pulled();
    if let Some(spec) = not_a_helper.spec.as_mut() {
        spec.init_containers = None;
    }
    let mut no_marker = pulled();
    no_marker.metadata.annotations = None;
    let mut tally = Tally::default();
    for (what, forged) in [
        ("a cache not in the store", no_cache),
        ("another endpoint than the cache's", other_endpoint),
        ("a helper of another image", other_image),
        ("a status of no injected container", not_a_helper),
        ("no marker", no_marker),
    ] {
        assert_eq!(finished(&forged, &facts()), [], "{what}");
        assert_eq!(tally.new_runs(&forged, &facts()), [], "{what}");
    }
    assert!(
        tally.seen.is_empty(),
        "nothing of a forged pod is remembered"
    );
}

#[test]
fn the_cache_label_is_the_cache_objects_own_name() {
    let renamed = |_: &str, _: &str| Some(cache("workflow", "stored", "10.0.0.1:5000"));
    let facts = Facts {
        helper_image: HELPER,
        cache: &renamed,
    };
    assert_eq!(finished(&pulled(), &facts)[0].cache, "workflow/stored");
}

#[test]
fn trim_keeps_only_what_the_counting_reads() {
    let mut fat = pulled();
    let big = "y".repeat(64 * 1024);
    fat.metadata
        .annotations
        .get_or_insert_default()
        .insert("note".into(), big.clone());
    fat.metadata.labels = Some([("big".into(), big.clone())].into());
    if let Some(spec) = fat.spec.as_mut() {
        for container in spec.init_containers.iter_mut().flatten() {
            container.args = Some(vec![big.clone()]);
        }
        spec.containers[0].args = Some(vec![big.clone()]);
    }
    let mut trimmed = fat.clone();
    trim(&mut trimmed);
    let size = serde_json::to_string(&trimmed).unwrap().len();
    assert!(size < 4096, "{size} bytes kept: {trimmed:?}");
    assert_eq!(finished(&trimmed, &facts()), finished(&fat, &facts()));
    assert_eq!(finished(&trimmed, &facts()).len(), 1);
}
