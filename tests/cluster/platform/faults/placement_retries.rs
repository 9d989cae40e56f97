//! A pod whose image does not exist, watched for a minute through the controller on a real
//! apiserver and the real registry: it is inspected (one registry request each: the HEAD of the
//! missing tag, counted in the registry's access log) and written (the attempt count, counted
//! from the pod's versions) only as often as docs/placement.md's backoff says: at 0, 1, 3, 7, 15
//! and 31 s, so at most 6 of each in the first minute. The controller's own write of the count
//! must not start the next inspection. The pod is read every 50 ms: writes on the documented
//! schedule are at least a second apart, so each is seen.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate};
use kube::Api;
use kube::api::PostParams;
use ocifit::api::placement_pod::{ATTEMPTS_ANNOTATION, POLICY_LABEL, SCHEDULING_GATE};
use serde_json::json;

use crate::support::Env;
use crate::support::placement::{self, annotation, create_policy, gates};

const NAMESPACE: &str = "retries";
/// How long the pod is watched.
const WINDOW: Duration = Duration::from_secs(60);
/// Inspections docs/placement.md allows in the first minute: at 0, 1, 3, 7, 15 and 31 s.
const DOCUMENTED: usize = 6;

#[tokio::test]
async fn a_missing_image_is_inspected_and_its_pod_written_only_as_often_as_documented() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let client = env.client.clone();
    ocifit_testkit::create_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    let _served = placement::serve(&env, "placement-retries", &[]).await;
    create_policy(
        &client,
        "held",
        json!({"onInspectionFailure": {"action": "Hold"}}),
    )
    .await;
    let image = env.registry().reference("missing/app:nope");
    let mut pod = placement::pod(
        "missing",
        NAMESPACE,
        json!({POLICY_LABEL: "held"}),
        &[("app", &image)],
    );
    pod.spec.as_mut().unwrap().scheduling_gates = Some(vec![PodSchedulingGate {
        name: SCHEDULING_GATE.into(),
    }]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);

    let log = env.registry().dir().join("registry.log");
    let before = std::fs::read_to_string(&log).unwrap().len();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // Every version of the pod seen over the window, from its creation on.
    let until = tokio::time::Instant::now() + WINDOW;
    let mut seen: Vec<Pod> = Vec::new();
    while tokio::time::Instant::now() < until {
        let pod = pods.get("missing").await.unwrap();
        if seen.last().map(|last| &last.metadata.resource_version)
            != Some(&pod.metadata.resource_version)
        {
            seen.push(pod);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let requests = std::fs::read_to_string(&log).unwrap()[before..]
        .matches(" /v2/missing/app/")
        .count();
    let now = pods.get("missing").await.unwrap();
    // ocifit's writes change the pod's metadata or spec; the scheduler's only its status.
    let writes = seen
        .windows(2)
        .filter(|pair| {
            pair[0].metadata.annotations != pair[1].metadata.annotations
                || pair[0].spec != pair[1].spec
        })
        .count();
    let attempts = annotation(&now, ATTEMPTS_ANNOTATION);
    eprintln!(
        "FAULT missing-image: in {WINDOW:?}, {requests} registry request(s) for the missing tag, \
         {writes} write(s) of the pod (of {} versions), failed-attempts {attempts:?}; documented: \
         at most {DOCUMENTED} of each",
        seen.len()
    );
    assert_eq!(gates(&now), [SCHEDULING_GATE], "held, still gated");
    assert!(
        (1..=DOCUMENTED).contains(&requests),
        "{requests} registry requests"
    );
    assert!((1..=DOCUMENTED).contains(&writes), "{writes} pod writes");
    let attempts: usize = attempts.parse().unwrap();
    assert!((1..=DOCUMENTED).contains(&attempts), "{attempts} attempts");
}
