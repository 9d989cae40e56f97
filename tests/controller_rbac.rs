//! `ocifit run` under exactly the RBAC of `config/rbac/` (a ServiceAccount token, no other
//! rights) against the real apiserver: it resolves a policy, writes its status, publishes
//! Events, holds the Lease the install created (it may not create one), and in the managed-certificate mode creates its webhook Secret and
//! patches the caBundle, so the apiserver calls its webhook over TLS it trusts and a labelled pod
//! gets its image; and the role grants nothing beyond (no policy spec writes, no pods).

mod controller_support;

use std::time::Duration;

use controller_support::{Controller, Env, FLAVOR, free_address, images, is, repo};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams};
use ocifit::api::pod::ENABLED_LABEL as ENABLED;
use ocifit_testkit::{PodWebhook, create_namespace, register_pod_webhook, wait_until_admitted};

#[tokio::test]
async fn the_controller_runs_under_the_role_in_config_rbac() {
    let env = Env::start().await;
    for file in std::fs::read_dir(repo().join("config/rbac")).expect("config/rbac") {
        let path = file.expect("a file").path();
        env.cluster
            .kubectl(["apply", "-f", &path.display().to_string()])
            .await
            .expect("kubectl apply");
    }
    let token =
        ocifit_testkit::service_account_token(&env.client, "ocifit-system", "ocifit-controller")
            .await
            .expect("a token");
    let kubeconfig = token_kubeconfig(&env, &token);

    let [debian, ubuntu, rocky] = env.push_flavors("ocifit/flavor-compat:v1").await;
    env.node("vanilla-1", &[(FLAVOR, "vanilla")]).await;
    env.node("chocolate-1", &[(FLAVOR, "chocolate")]).await;
    env.node("strawberry-1", &[(FLAVOR, "strawberry")]).await;
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
    env.policy("flavors", "ocifit/flavor-compat:v1", serde_json::json!({}))
        .await;
    let (status, _) = env
        .wait_status("flavors", Duration::from_secs(30), "Ready", |s| {
            is(s, "Ready", "True", "Resolved")
        })
        .await;
    assert_eq!(
        images(&status),
        [Some(debian.clone()), Some(rocky), Some(ubuntu)]
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
    // The webhook, served with the certificate it issued itself, patches a labelled pod.
    let probe: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "probe", "labels": {ENABLED: "true"}},
        "spec": {
            "nodeSelector": {FLAVOR: "vanilla"},
            "containers": [{"name": "app", "image": "placeholder:latest"}],
        },
    }))
    .expect("a pod");
    let admitted = wait_until_admitted(
        &env.client,
        "rbac-pods",
        &probe,
        Duration::from_secs(30),
        |pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.containers[0].image.as_deref())
                != Some("placeholder:latest")
        },
    )
    .await
    .expect("the webhook reached over TLS the apiserver trusts");
    let image = admitted.spec.and_then(|s| s.containers[0].image.clone());
    assert_eq!(image.as_deref(), Some(debian.as_str()));
    let secret = Api::<Secret>::namespaced(env.client.clone(), "ocifit-system")
        .get("ocifit-webhook-tls")
        .await
        .expect("the webhook Secret");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));

    // Any refusal is logged with the apiserver's "forbidden" message (a bare "403" could be a
    // timestamp).
    let log = controller.log_text().to_lowercase();
    assert!(!log.contains("forbidden"), "{log}");

    // Nothing beyond: the same identity cannot change a policy's spec, list pods, or use any
    // Lease but its own.
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("the kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("a config");
    let sa = kube::Client::try_from(config).expect("a client");
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
    let pods = Api::<Pod>::all(sa.clone()).list(&Default::default()).await;
    assert!(
        matches!(&pods, Err(kube::Error::Api(s)) if s.code == 403),
        "{pods:?}"
    );
    // Its own Lease only: it can neither create a Lease nor touch another one.
    let leases = Api::<Lease>::namespaced(sa, "ocifit-system");
    let other: Lease = serde_json::from_value(serde_json::json!({"metadata": {"name": "other"}}))
        .expect("a lease");
    let created = leases.create(&Default::default(), &other).await;
    assert!(
        matches!(&created, Err(kube::Error::Api(s)) if s.code == 403),
        "{created:?}"
    );
    Api::<Lease>::namespaced(env.client.clone(), "ocifit-system")
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

    assert!(controller.stop().await.success());
}

/// A kubeconfig for the env's cluster that authenticates with `token` only.
fn token_kubeconfig(env: &Env, token: &str) -> std::path::PathBuf {
    let admin = kube::config::Kubeconfig::read_from(env.cluster.kubeconfig()).expect("kubeconfig");
    let cluster = admin
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .expect("a cluster");
    let mut cluster_json = serde_json::json!({"server": cluster.server});
    if let Some(data) = cluster.certificate_authority_data {
        cluster_json["certificate-authority-data"] = data.into();
    }
    if let Some(file) = cluster.certificate_authority {
        cluster_json["certificate-authority"] = file.into();
    }
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster_json}],
        "users": [{"name": "ocifit-controller", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "ocifit-controller"}}],
        "current-context": "sa",
    });
    let path = env.cluster.dir().join("ocifit-controller.kubeconfig");
    std::fs::write(&path, config.to_string()).expect("a kubeconfig file");
    path
}
