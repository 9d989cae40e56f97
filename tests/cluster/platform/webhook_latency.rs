//! What ocifit adds to pod creation as the apiserver measures it: pods created back to back
//! (each create awaited before the next, so the apiserver reuses its connection to the webhook
//! at once), through both of ocifit's pod webhooks (`/mutate` for opted-in pods and the
//! placement gate), read from the apiserver's own histogram
//! `apiserver_admission_webhook_admission_duration_seconds`. A call on a reused connection must
//! not wait for the peer's delayed ACK (Nagle's algorithm on the webhook's socket held each
//! response back ~40 ms), so the mean of each webhook stays well under 20 ms.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::placement_pod::SCHEDULING_GATE;
use ocifit_testkit::webhook_durations;
use serde_json::json;

use crate::support::objects::{OptIn, TestPod};
use crate::support::placement::{create_policy, gates};
use crate::support::webhook::{GATE, Serving};
use crate::support::{Env, FLAVOR};

const NAMESPACE: &str = "webhook-latency";
/// Pods created back to back, after the warm-up ones.
const PODS: usize = 60;
/// The mean a webhook call may take as the apiserver measures it: the delayed-ACK stall alone
/// is ~40 ms, an answer on loopback well under a millisecond.
const MEAN_LIMIT_SECONDS: f64 = 0.020;
/// The webhooks' names, as the apiserver labels its histogram.
const MUTATE: &str = "pods.ocifit.io";
/// A bucket bound of the apiserver's histogram, under the delayed-ACK stall.
const WITHIN_SECONDS: f64 = 0.025;

#[tokio::test]
async fn back_to_back_pod_creations_wait_no_delayed_ack_in_either_webhook() {
    let env = Env::start_scheduling(crate::support::ocifit_binary()).await;
    let Serving {
        by_flavor,
        certificate,
        address,
        controller,
    } = env.serve_flavors(NAMESPACE, "webhook-latency", &[]).await;
    env.create_policy(&env.flavor_policy("flavors")).await;
    env.wait_ready("flavors").await;
    create_policy(&env.client, "everything", json!({})).await;

    certificate
        .activate_mutate(
            &env,
            "ocifit-latency-mutate",
            &address,
            NAMESPACE,
            &by_flavor["vanilla"],
        )
        .await;
    certificate
        .register_gate(&env, "ocifit-latency-gate", &address, NAMESPACE)
        .await;

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NAMESPACE);
    let create = async |name: String| {
        let pod = TestPod::named(&name)
            .opted_in()
            .node_selector(FLAVOR, "vanilla")
            .build();
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("the pod admitted")
    };
    // Until the gate's configuration is in the apiserver's view, pods pass it by.
    let mut warm_up = 0;
    while gates(&create(format!("warm-{warm_up}")).await) != [SCHEDULING_GATE] {
        warm_up += 1;
        assert!(warm_up < 300, "the gate never became active");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let before = webhook_durations(&env.client)
        .await
        .expect("the apiserver's webhook histograms");
    for i in 0..PODS {
        let created = create(format!("pod-{i}")).await;
        assert_eq!(gates(&created), [SCHEDULING_GATE], "pod-{i} gated");
        assert_eq!(
            created.spec.as_ref().expect("a spec").containers[0]
                .image
                .as_deref(),
            Some(by_flavor["vanilla"].as_str()),
            "pod-{i} given its class's image"
        );
    }
    let after = webhook_durations(&env.client)
        .await
        .expect("the apiserver's webhook histograms");

    for webhook in [MUTATE, GATE] {
        let observed = after
            .get(webhook)
            .cloned()
            .unwrap_or_default()
            .since(&before.get(webhook).cloned().unwrap_or_default());
        let within = observed.within(WITHIN_SECONDS);
        let mean = observed.mean_seconds();
        println!(
            "LATENCY {webhook}: {} calls, mean {:.2} ms, {} of them within 25 ms (apiserver's histogram)",
            observed.count,
            mean * 1000.0,
            within
        );
        assert!(
            observed.count >= PODS as f64,
            "{webhook}: the apiserver measured {} calls for {PODS} pods",
            observed.count
        );
        assert!(
            mean < MEAN_LIMIT_SECONDS,
            "{webhook}: each call took {:.1} ms on average as the apiserver measured it \
             ({} calls, {} within 25 ms)",
            mean * 1000.0,
            observed.count,
            within
        );
    }
    assert!(controller.stop().await.success());
}
