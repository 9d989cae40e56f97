use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{Value, json};

use super::*;

const LOG: &str = "exec /bin/arm-app: exec format error\n";

/// The terminated state of container instance `id`.
fn terminated(id: &str, message: Option<&str>) -> Value {
    json!({"terminated": {
        "exitCode": 1, "reason": "Error", "message": message,
        "containerID": format!("containerd://{id}")
    }})
}

fn status(name: &str, restarts: i32, state: Value, last: Value) -> Value {
    json!({
        "name": name, "image": "registry.test/arm:v1",
        "imageID": "registry.test/arm@sha256:aaaa", "ready": false,
        "restartCount": restarts, "state": state, "lastState": last
    })
}

fn pod(init: Vec<Value>, main: Vec<Value>) -> Pod {
    Pod {
        status: Some(
            serde_json::from_value::<PodStatus>(json!({
                "initContainerStatuses": init, "containerStatuses": main
            }))
            .unwrap(),
        ),
        ..Pod::default()
    }
}

fn instances(failures: &[Failure]) -> Vec<(bool, &str, &str)> {
    failures
        .iter()
        .map(|f| {
            (
                f.init,
                f.container.as_str(),
                f.instance.trim_start_matches("containerd://"),
            )
        })
        .collect()
}

#[test]
fn a_terminated_container_whose_log_tail_says_exec_format_error_is_found() {
    let found = failures(&pod(
        vec![],
        vec![status("app", 0, terminated("c0", Some(LOG)), json!({}))],
    ));
    assert_eq!(instances(&found), [(false, "app", "c0")]);
    assert_eq!(found[0].image, "registry.test/arm:v1");
    assert_eq!(found[0].ran_digest(), Some("sha256:aaaa"));
}

#[test]
fn the_image_is_named_as_the_pod_names_it_not_as_the_runtime_reports_it() {
    // containerd reports the first name it holds for the digest: another tag of the same content.
    let mut moved = pod(
        vec![],
        vec![status("app", 0, terminated("c0", Some(LOG)), json!({}))],
    );
    moved.spec = Some(
        serde_json::from_value(
            json!({"containers": [{"name": "app", "image": "registry.test/moved:v1"}]}),
        )
        .unwrap(),
    );
    assert_eq!(failures(&moved)[0].image, "registry.test/moved:v1");
}

#[test]
fn other_failures_and_silent_ones_are_not_exec_format_errors() {
    for message in [
        None,
        Some(""),
        Some("panic: runtime error: index out of range"),
        Some("exec /bin/app: no such file or directory"),
    ] {
        let found = failures(&pod(
            vec![],
            vec![status(
                "app",
                3,
                terminated("c3", message),
                terminated("c2", message),
            )],
        ));
        assert!(found.is_empty(), "{message:?}: {found:?}");
    }
    let running = pod(
        vec![],
        vec![status("app", 0, json!({"running": {}}), json!({}))],
    );
    assert!(failures(&running).is_empty());
    assert!(failures(&Pod::default()).is_empty(), "no status yet");
}

#[test]
fn init_containers_and_the_previous_instance_are_read_too() {
    let waiting = json!({"waiting": {"reason": "CrashLoopBackOff"}});
    let found = failures(&pod(
        vec![status(
            "setup",
            2,
            waiting.clone(),
            terminated("s2", Some(LOG)),
        )],
        vec![status(
            "app",
            5,
            terminated("a5", Some("EXEC FORMAT ERROR")),
            terminated("a4", Some(LOG)),
        )],
    ));
    assert_eq!(
        instances(&found),
        [
            (true, "setup", "s2"),
            (false, "app", "a5"),
            (false, "app", "a4")
        ]
    );
}

#[test]
fn each_failed_instance_is_reported_once_as_the_status_moves_on() {
    let mut seen = Seen::default();
    let waiting = json!({"waiting": {"reason": "CrashLoopBackOff"}});
    let first = pod(
        vec![],
        vec![status("app", 0, terminated("c0", Some(LOG)), json!({}))],
    );
    assert_eq!(
        instances(&seen.fresh("u", failures(&first))),
        [(false, "app", "c0")]
    );
    assert!(
        seen.fresh("u", failures(&first)).is_empty(),
        "the same status again"
    );
    // Backing off: the same instance moved to lastState, the restart count unchanged.
    let backing_off = pod(
        vec![],
        vec![status(
            "app",
            0,
            waiting.clone(),
            terminated("c0", Some(LOG)),
        )],
    );
    assert!(seen.fresh("u", failures(&backing_off)).is_empty());
    // Restarted and failed again: only the new instance.
    let again = pod(
        vec![],
        vec![status(
            "app",
            1,
            terminated("c1", Some(LOG)),
            terminated("c0", Some(LOG)),
        )],
    );
    assert_eq!(
        instances(&seen.fresh("u", failures(&again))),
        [(false, "app", "c1")]
    );
    assert!(
        instances(&seen.fresh("other", failures(&again))).len() == 2,
        "another pod's failures are its own"
    );
    seen.forget("other");
    assert_eq!(seen.len(), 1);
    let running = pod(
        vec![],
        vec![status("app", 2, json!({"running": {}}), json!({}))],
    );
    assert!(seen.fresh("u", failures(&running)).is_empty());
    assert!(
        seen.is_empty(),
        "nothing kept of a pod that shows no failure"
    );
}

#[test]
fn the_note_names_the_image_the_node_and_what_ocifit_knew() {
    let failure = Failure {
        container: "app".into(),
        init: false,
        image: "registry.test/arm:v1".into(),
        image_id: "registry.test/arm@sha256:bbbb".into(),
        instance: "c0".into(),
    };
    let arm: Platform = "linux/arm64".parse().unwrap();
    let note = describe(
        &failure,
        "real-1",
        "linux/amd64",
        Some("Unconstrained"),
        &Known::Platforms {
            digest: "sha256:aaaa".into(),
            platforms: vec![arm],
        },
    );
    for part in [
        "container app (image registry.test/arm:v1) failed with exec format error on node real-1 (linux/amd64)",
        "released the pod Unconstrained",
        "ocifit inspected sha256:aaaa: linux/arm64",
        "the tag moved since",
        "the node ran sha256:bbbb",
    ] {
        assert!(note.contains(part), "{part:?} not in {note}");
    }
    let never = describe(&failure, "real-1", "linux/amd64", None, &Known::Nothing);
    assert!(never.contains("had not inspected"), "{never}");
    assert!(!never.contains("released the pod"), "{never}");
}

#[test]
fn the_inspected_image_and_digest_are_read_from_the_spec_and_the_decision() {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"annotations": {"placement.ocifit.io/digests": "{\"app\":\"sha256:aaaa\"}"}},
        "spec": {
            "initContainers": [{"name": "app", "image": "init:1"}],
            "containers": [{"name": "app", "image": "arm:v1"}]
        }
    }))
    .unwrap();
    let failure = |init| Failure {
        container: "app".into(),
        init,
        image: "docker.io/library/arm:v1".into(),
        image_id: String::new(),
        instance: String::new(),
    };
    assert_eq!(spec_image(&pod, &failure(false)), "arm:v1");
    assert_eq!(spec_image(&pod, &failure(true)), "init:1");
    assert_eq!(
        inspected_digest(&pod, "app").as_deref(),
        Some("sha256:aaaa")
    );
    assert_eq!(inspected_digest(&pod, "other"), None);
    pod.spec = None;
    assert_eq!(
        spec_image(&pod, &failure(false)),
        "docker.io/library/arm:v1"
    );
}
