//! ocifit's own ServiceAccount under `config/rbac/` (its ClusterRole and the
//! ValidatingAdmissionPolicy the chart ships) against the real apiserver: the objects ocifit
//! writes for an ArtifactCache (made by its own `desired` and `secret`, on a volume and on object
//! storage with two replicas, a CA from a ConfigMap and a PodDisruptionBudget) are allowed, and what
//! a stolen token would write with the same RBAC is refused: a Deployment of another image, with
//! another ServiceAccount, a hostPath volume, or owned by no cache; a Secret of another kind; a
//! NodePort Service; a PodDisruptionBudget owned by no cache.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{HostPathVolumeSource, PodSpec, Volume};
use kube::api::{PostParams, Resource};
use kube::{Api, Client};
use ocifit::api::ArtifactCache;
use ocifit::artifact_cache::{CacheEnvironment, Desired, desired};
use ocifit::artifact_cache::{Generated, secret};
use ocifit_testkit::create_namespace;

use crate::support::access::{client_from, service_account_kubeconfig};
use crate::support::{Env, apply_config_rbac};

const NAMESPACE: &str = "least-power";
const OWN_NAMESPACE: &str = "ocifit-system";
/// How long the apiserver takes to enforce a policy it was just given (it reloads policies
/// about once a second).
const ENFORCED_WITHIN: Duration = Duration::from_secs(30);

#[tokio::test]
async fn ocifits_token_writes_only_what_ocifit_writes() {
    let env = Env::start(crate::support::ocifit_binary()).await;
    let admin = env.client.clone();
    // config/rbac's ServiceAccount lives there (another test may have made it already).
    let _ = create_namespace(&admin, OWN_NAMESPACE).await;
    apply_config_rbac(&env.cluster).await;
    create_namespace(&admin, NAMESPACE)
        .await
        .expect("a namespace");
    let cache: ArtifactCache = serde_json::from_value(serde_json::json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
        "metadata": {"name": "cache", "namespace": NAMESPACE},
        "spec": {}
    }))
    .expect("a cache");
    let cache = Api::<ArtifactCache>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &cache)
        .await
        .expect("the cache");
    let kubeconfig =
        service_account_kubeconfig(&env.cluster, OWN_NAMESPACE, "ocifit-controller").await;
    let ocifit = client_from(&kubeconfig).await;

    let credentials = secret(&cache, &Generated::new().expect("credentials")).expect("a Secret");
    let settings = CacheEnvironment {
        own_namespace: OWN_NAMESPACE,
        credentials: Some("cache-credentials-x"),
    };
    let Desired {
        deployment,
        service,
        network_policy,
        ..
    } = desired(&cache, settings)
        .expect("the cache's objects")
        .expect("a deployed cache");
    let mut on_bucket = cache.clone();
    on_bucket.spec = serde_json::from_value(serde_json::json!({
        "replicas": 2,
        "storage": {"s3": {
            "bucket": "artifacts", "endpoint": "https://s3.example.com",
            "credentialsSecretRef": {"name": "store-keys"},
            "ca": {"configMapKeyRef": {"name": "store-ca", "key": "ca.crt"}}
        }}
    }))
    .expect("a spec on object storage");
    let Desired {
        deployment: replicated,
        network_policy: closed_egress,
        disruption_budget,
        ..
    } = desired(&on_bucket, settings)
        .expect("the cache's objects")
        .expect("a deployed cache");
    let budget = disruption_budget.expect("a PodDisruptionBudget on object storage");

    let mut other_image = deployment.clone();
    pod_spec(&mut other_image).containers[0].image = Some("docker.io/library/busybox:1".into());
    wait_enforced(&ocifit, &other_image).await;

    // What ocifit writes passes.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    create(&ocifit, &deployment, &dry_run)
        .await
        .expect("ocifit's own Deployment");
    create(&ocifit, &service, &dry_run)
        .await
        .expect("ocifit's own Service");
    create(&ocifit, &network_policy, &dry_run)
        .await
        .expect("ocifit's own NetworkPolicy");
    create(&ocifit, &credentials, &dry_run)
        .await
        .expect("ocifit's own credentials Secret");
    create(&ocifit, &replicated, &dry_run)
        .await
        .expect("ocifit's own Deployment on object storage");
    create(&ocifit, &closed_egress, &dry_run)
        .await
        .expect("ocifit's own NetworkPolicy with its egress");
    create(&ocifit, &budget, &dry_run)
        .await
        .expect("ocifit's own PodDisruptionBudget");

    // What a stolen token would write is refused.
    let mut service_account = deployment.clone();
    pod_spec(&mut service_account).service_account_name = Some("admin".into());
    let mut token = deployment.clone();
    pod_spec(&mut token).automount_service_account_token = Some(true);
    let mut host_path = deployment.clone();
    pod_spec(&mut host_path)
        .volumes
        .get_or_insert_default()
        .push(Volume {
            name: "root".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/".into(),
                type_: None,
            }),
            ..Volume::default()
        });
    let mut unowned = deployment.clone();
    unowned.metadata.owner_references = None;
    let mut opaque = credentials.clone();
    opaque.metadata.generate_name = Some("stolen-".into());
    let mut token_secret = credentials.clone();
    // The token of another ServiceAccount, which the token controller would fill in.
    token_secret.type_ = Some("kubernetes.io/service-account-token".into());
    token_secret.metadata.annotations = Some(
        [(
            "kubernetes.io/service-account.name".into(),
            "default".into(),
        )]
        .into(),
    );
    let mut unowned_budget = budget.clone();
    unowned_budget.metadata.owner_references = None;
    let mut node_port = service.clone();
    node_port.spec.get_or_insert_default().type_ = Some("NodePort".into());
    let refusals = [
        (
            "another image",
            create(&ocifit, &other_image, &dry_run).await,
        ),
        (
            "another ServiceAccount",
            create(&ocifit, &service_account, &dry_run).await,
        ),
        (
            "a ServiceAccount token",
            create(&ocifit, &token, &dry_run).await,
        ),
        (
            "a hostPath volume",
            create(&ocifit, &host_path, &dry_run).await,
        ),
        ("no owning cache", create(&ocifit, &unowned, &dry_run).await),
        (
            "a Secret of another name",
            create(&ocifit, &opaque, &dry_run).await,
        ),
        (
            "a Secret of another type",
            create(&ocifit, &token_secret, &dry_run).await,
        ),
        (
            "a NodePort Service",
            create(&ocifit, &node_port, &dry_run).await,
        ),
        (
            "a PodDisruptionBudget of no cache",
            create(&ocifit, &unowned_budget, &dry_run).await,
        ),
    ];
    for (what, result) in refusals {
        let refused = result.expect_err(what);
        assert!(
            refused.contains("ocifit-least-power"),
            "{what}: refused, but not by the policy: {refused}"
        );
    }
    // The same objects from the admin: the policy binds ocifit's ServiceAccount alone.
    create(&admin, &other_image, &dry_run)
        .await
        .expect("the admin's Deployment");
}

fn pod_spec(deployment: &mut Deployment) -> &mut PodSpec {
    deployment
        .spec
        .as_mut()
        .and_then(|spec| spec.template.spec.as_mut())
        .expect("a pod template")
}

/// Creates `object` in [`NAMESPACE`] as `client`; the apiserver's refusal as text.
async fn create<K>(client: &Client, object: &K, params: &PostParams) -> Result<(), String>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + k8s_openapi::serde::Serialize
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), NAMESPACE)
        .create(params, object)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Waits until the apiserver enforces the policy it was given: `refused` is refused.
async fn wait_enforced(client: &Client, refused: &Deployment) {
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let started = Instant::now();
    while create(client, refused, &dry_run).await.is_ok() {
        assert!(
            started.elapsed() < ENFORCED_WITHIN,
            "the admission policy was never enforced"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
