//! `ocifit run` under exactly the RBAC of `config/rbac/` (a ServiceAccount token, no other
//! rights) against the real apiserver: it resolves a policy, writes its status, publishes
//! Events, holds the Lease the install created (it may not create one), and in the managed-certificate mode creates its webhook Secret and
//! patches the caBundle, so the apiserver calls its webhook over TLS it trusts and a labelled pod
//! gets its image; and the role grants nothing beyond (no policy spec writes, no pods, no Lease
//! but its own).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams};
use ocifit::api::pod::ENABLED_LABEL as ENABLED;
use ocifit_testkit::{PodWebhook, create_namespace, register_pod_webhook, wait_until_admitted};

use crate::support::access::{client_from, service_account_kubeconfig};
use crate::support::objects::{OptIn, PLACEHOLDER, TestPod, linux_node};
use crate::support::{Controller, Env, FLAVOR, apply_config_rbac, free_address, images};

#[tokio::test]
async fn the_controller_runs_under_the_role_in_config_rbac() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    apply_config_rbac(&env.cluster).await;
    let kubeconfig =
        service_account_kubeconfig(&env.cluster, "ocifit-system", "ocifit-controller").await;

    let [debian, ubuntu, rocky] = env.push_flavors().await;
    for flavor in ["vanilla", "chocolate", "strawberry"] {
        env.add_node(linux_node(&format!("{flavor}-1")).label(FLAVOR, flavor))
            .await;
    }
    // The webhook configuration as the chart installs it, but calling the host by a name the
    // managed certificate carries (the "Service" is `localhost`), with no caBundle yet.
    let webhook_address = free_address();
    let port = webhook_address.rsplit(':').next().expect("a port");
    create_namespace(&env.client, "rbac-pods")
        .await
        .expect("a namespace");
    let webhook = PodWebhook::new("ocifit", &format!("https://localhost:{port}/mutate"), "")
        .match_label(ENABLED, "true")
        .in_namespace("rbac-pods");
    register_pod_webhook(&env.client, &webhook)
        .await
        .expect("the webhook configuration");
    let controller = Controller::start(
        &env,
        "rbac",
        &[
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--manage-webhook-certificate",
            "--webhook-service",
            "localhost",
            "--webhook-bind-address",
            &webhook_address,
        ],
    )
    .await;

    it_resolves_writes_status_publishes_events_and_holds_its_lease(
        &env,
        [&debian, &ubuntu, &rocky],
    )
    .await;
    its_webhook_serves_the_certificate_it_issued_itself(&env, &debian).await;

    // Any refusal is logged with the apiserver's "forbidden" message (a bare "403" could be a
    // timestamp).
    let log = controller.log_text().to_lowercase();
    assert!(!log.contains("forbidden"), "{log}");

    the_role_grants_nothing_beyond(&kubeconfig, &env.client).await;

    assert!(controller.stop().await.success());
}

async fn it_resolves_writes_status_publishes_events_and_holds_its_lease(
    env: &Env,
    [debian, ubuntu, rocky]: [&String; 3],
) {
    env.create_policy(&env.flavor_policy("flavors")).await;
    let status = env.wait_ready("flavors").await;
    assert_eq!(
        images(&status),
        [
            Some(debian.clone()),
            Some(rocky.clone()),
            Some(ubuntu.clone())
        ]
    );
    // Events are published under the role.
    env.wait_event("flavors", "Normal", "Resolved").await;
    let lease = Api::<Lease>::namespaced(env.client.clone(), "ocifit-system")
        .get("ocifit-controller")
        .await
        .expect("the lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("rbac")
    );
}

/// It patches a labelled pod, reached by the apiserver over TLS it trusts.
async fn its_webhook_serves_the_certificate_it_issued_itself(env: &Env, debian: &str) {
    let probe = TestPod::named("probe")
        .opted_in()
        .node_selector(FLAVOR, "vanilla")
        .build();
    let admitted = wait_until_admitted(
        &env.client,
        "rbac-pods",
        &probe,
        Duration::from_secs(30),
        |pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.containers[0].image.as_deref())
                != Some(PLACEHOLDER)
        },
    )
    .await
    .expect("the webhook reached over TLS the apiserver trusts");
    let image = admitted.spec.and_then(|s| s.containers[0].image.clone());
    assert_eq!(image.as_deref(), Some(debian));
    let secret = Api::<Secret>::namespaced(env.client.clone(), "ocifit-system")
        .get("ocifit-webhook-tls")
        .await
        .expect("the webhook Secret");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
}

/// The same identity cannot change a policy's spec, list pods, or create or take any Lease but its
/// own (`admin` sets up another Lease to try).
async fn the_role_grants_nothing_beyond(kubeconfig: &Path, admin: &kube::Client) {
    let sa = client_from(kubeconfig).await;
    let spec_write = Api::<ocifit::api::ImageSelectionPolicy>::all(sa.clone())
        .patch(
            "flavors",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"targetImage": "other:latest"}})),
        )
        .await;
    assert!(
        matches!(&spec_write, Err(kube::Error::Api(s)) if s.code == 403),
        "{spec_write:?}"
    );
    // Placement may read and update pods, never create or delete one.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "rbac"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    }))
    .expect("a pod");
    let created = Api::<Pod>::namespaced(sa.clone(), "default")
        .create(&Default::default(), &pod)
        .await;
    assert!(
        matches!(&created, Err(kube::Error::Api(s)) if s.code == 403),
        "{created:?}"
    );
    let deleted = Api::<Pod>::namespaced(sa.clone(), "default")
        .delete("rbac", &Default::default())
        .await;
    assert!(
        matches!(&deleted, Err(kube::Error::Api(s)) if s.code == 403),
        "{deleted:?}"
    );
    // A cache's registry objects are applied and watched, never deleted by us (the garbage
    // collector does); a cache's spec is the user's.
    let deleted = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(sa.clone(), "default")
        .delete("any-registry", &Default::default())
        .await;
    assert!(
        matches!(&deleted, Err(kube::Error::Api(s)) if s.code == 403),
        "{deleted:?}"
    );
    let cache_write = Api::<ocifit::api::ArtifactCache>::namespaced(sa.clone(), "default")
        .patch(
            "oras",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"image": "other:latest"}})),
        )
        .await;
    assert!(
        matches!(&cache_write, Err(kube::Error::Api(s)) if s.code == 403),
        "{cache_write:?}"
    );
    let leases = Api::<Lease>::namespaced(sa, "ocifit-system");
    let other: Lease = serde_json::from_value(serde_json::json!({"metadata": {"name": "other"}}))
        .expect("a lease");
    let created = leases.create(&Default::default(), &other).await;
    assert!(
        matches!(&created, Err(kube::Error::Api(s)) if s.code == 403),
        "{created:?}"
    );
    Api::<Lease>::namespaced(admin.clone(), "ocifit-system")
        .create(&Default::default(), &other)
        .await
        .expect("the admin creates another lease");
    let taken = leases
        .patch(
            "other",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"holderIdentity": "rbac"}})),
        )
        .await;
    assert!(
        matches!(&taken, Err(kube::Error::Api(s)) if s.code == 403),
        "{taken:?}"
    );
}
