//! The Helm chart against the real local control plane (no kubelet runs its pods, so the stored
//! objects are what is checked): every value set's render passes `kubeconform -strict` with schemas
//! generated from this apiserver's OpenAPI and from the CRDs (ours, cert-manager's, the Prometheus
//! Operator's ServiceMonitor and PrometheusRule), never fetched; and `helm install` → `helm upgrade` → `helm uninstall` stores the
//! documented objects, upgrades an older CRD to the chart's, keeps a caBundle patched in by ocifit,
//! refuses opted-in pods while its Service is down but never touches other pods, kube-system or its
//! own namespace, and leaves the CRD and users' policies behind.

#![allow(clippy::unwrap_used)] // the steps outside #[test] fns fail the test loudly, as the test does

use std::path::Path;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::ImageSelectionPolicy;
use ocifit_testkit::chart::{
    self, NAMESPACE, RELEASE, VALUE_SETS, chart_dir, documents, file_documents, find, helm, render,
};
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{Cluster, KubeconformSchemas, SharedCluster, Tool, repo_root};
use serde_json::json;

use crate::support::objects::{OptIn, TestPod};

static CLUSTER: SharedCluster = SharedCluster::new(Cluster::builder);

const CRD: &str = "imageselectionpolicies.ocifit.io";

#[tokio::test]
async fn every_value_set_renders_past_kubeconform_strict_with_local_schemas_only() {
    let cluster = CLUSTER.get().await.unwrap();
    let tools = cluster.tools().clone();
    let schemas = KubeconformSchemas::create(cluster.dir().join("kubeconform-schemas")).unwrap();
    let builtin = schemas
        .add_from_apiserver(&cluster.client().unwrap())
        .await
        .unwrap();
    assert!(builtin > 50, "only {builtin} kinds from the apiserver");
    let crds = [
        repo_root().join("crds/imageselectionpolicies.ocifit.io.yaml"),
        repo_root().join("crds/artifactcaches.ocifit.io.yaml"),
        repo_root().join("crds/placementpolicies.ocifit.io.yaml"),
        tools.path(Tool::CertManagerCrds).unwrap(),
        tools.path(Tool::ServiceMonitorCrd).unwrap(),
        tools.path(Tool::PrometheusRuleCrd).unwrap(),
    ];
    for file in &crds {
        assert!(
            schemas.add_crd_file(file).unwrap() > 0,
            "{}",
            file.display()
        );
    }

    for (name, sets) in VALUE_SETS {
        let manifests = render(&sets.concat()).await.unwrap();
        let report = schemas
            .validate(&tools, &manifests)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let count = documents(&manifests).unwrap().len();
        let expected = format!("Valid: {count}, Invalid: 0, Errors: 0, Skipped: 0");
        assert!(report.contains(&expected), "{name}: {report}");
    }

    // The schemas are strict: a misspelt field anywhere is refused, as the apiserver would drop it.
    let misspelt = render(&[]).await.unwrap().replace(
        "readOnlyRootFilesystem: true",
        "readOnlyRootFileSystem: true",
    );
    let err = schemas
        .validate(&tools, &misspelt)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("readOnlyRootFileSystem"), "{err}");
    assert!(err.contains("Deployment"), "{err}");
    let certificate = render(&["tls.mode=certManager"]).await.unwrap().replace(
        "rotationPolicy: Always",
        "rotationPolicy: Always\n    rotate: true",
    );
    let err = schemas
        .validate(&tools, &certificate)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("rotate"), "{err}");
    assert!(err.contains("Certificate"), "{err}");
}

/// A copy of the chart whose CRD is an older state: without the `Classes` printer column.
fn older_chart(dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("ocifit-older");
    copy_dir(&chart_dir(), &copy);
    let crd = copy.join("files/imageselectionpolicies.ocifit.io.yaml");
    let text = std::fs::read_to_string(&crd).expect("the chart's CRD");
    let column = "    - description: Number of node classes\n      jsonPath: .status.classCount\n      name: Classes\n      type: integer\n";
    assert!(
        text.contains(column),
        "the CRD lost its Classes column; update this test"
    );
    std::fs::write(&crd, text.replace(column, "")).expect("the older CRD written");
    copy
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a directory");
    for entry in std::fs::read_dir(from).expect("the chart's directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("a copied file");
        }
    }
}

fn columns(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect()
}

#[tokio::test]
async fn helm_install_upgrade_and_uninstall_store_the_chart_and_keep_the_crd_and_policies() {
    let cluster = CLUSTER.get().await.unwrap();
    let client = cluster.client().unwrap();
    let older = older_chart(cluster.dir());

    chart::install(&older, &[], cluster.kubeconfig())
        .await
        .unwrap();
    the_install_stores_the_documented_objects(&client).await;
    let ca_bundle = a_users_policy_and_the_ca_bundle_ocifit_patches_in(&cluster).await;
    the_upgrade_updates_the_crd_and_keeps_ocifits_ca_bundle(&cluster, &ca_bundle).await;
    without_endpoints_only_opted_in_pods_outside_system_namespaces_are_refused(&client).await;
    the_uninstall_keeps_the_crd_and_users_policies(&cluster).await;
}

/// From the older chart: its CRD without the Classes column.
async fn the_install_stores_the_documented_objects(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert_eq!(
        columns(&crds.get(CRD).await.unwrap()),
        ["Ready", "Artifact", "Age"]
    );
    let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get("ocifit-controller")
        .await
        .unwrap();
    let stored = serde_json::to_value(&deployment).unwrap();
    assert_eq!(stored["spec"]["replicas"], 2);
    let pod = &stored["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "ocifit-controller");
    assert_eq!(
        pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"],
        true
    );
    assert_eq!(
        pod["containers"][0]["readinessProbe"]["httpGet"]["path"],
        "/readyz"
    );
    assert!(
        pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--manage-webhook-certificate"))
    );
    let rbac = file_documents("config/rbac/cluster_role.yaml").unwrap();
    let cluster_role = Api::<ClusterRole>::all(client.clone())
        .get("ocifit-controller")
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&cluster_role.rules).unwrap(),
        find(&rbac, "ClusterRole", "ocifit-controller").unwrap()["rules"]
    );
    let lease_role = Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .get("ocifit-leader-election")
        .await
        .unwrap();
    let leader = file_documents("config/rbac/leader_election_role.yaml").unwrap();
    assert_eq!(
        serde_json::to_value(&lease_role.rules).unwrap(),
        find(&leader, "Role", "ocifit-leader-election").unwrap()["rules"]
    );
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let webhook =
        serde_json::to_value(configurations.get("ocifit").await.unwrap()).unwrap()["webhooks"][0]
            .clone();
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["clientConfig"]["service"]["path"], "/mutate");
    assert_eq!(
        webhook["objectSelector"]["matchLabels"]["oci.image.compatibilities.selection/enabled"],
        "true"
    );
}

/// The example policy, and the caBundle ocifit patches in (managed mode) under its own field
/// manager; returns that caBundle.
async fn a_users_policy_and_the_ca_bundle_ocifit_patches_in(cluster: &Cluster) -> String {
    cluster
        .kubectl([
            "apply",
            "-f",
            repo_root().join("example/policy.yaml").to_str().unwrap(),
        ])
        .await
        .unwrap();
    let ca = CertificateAuthority::new("ocifit-webhook-ca").unwrap();
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.cert_pem());
    let patch =
        json!([{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca_bundle}]);
    let manager = format!("--field-manager={}", ocifit::api::FIELD_MANAGER);
    cluster
        .kubectl([
            "patch",
            "mutatingwebhookconfiguration",
            "ocifit",
            "--type=json",
            &manager,
            "-p",
            &patch.to_string(),
        ])
        .await
        .unwrap();
    ca_bundle
}

async fn the_upgrade_updates_the_crd_and_keeps_ocifits_ca_bundle(
    cluster: &Cluster,
    ca_bundle: &str,
) {
    let client = cluster.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    helm(
        &[
            "upgrade",
            RELEASE,
            chart_dir().to_str().unwrap(),
            "--namespace",
            NAMESPACE,
            "--set",
            "webhook.timeoutSeconds=10",
        ],
        Some(cluster.kubeconfig()),
    )
    .await
    .unwrap();

    let upgraded = crds.get(CRD).await.unwrap();
    assert_eq!(
        columns(&upgraded),
        ["Ready", "Classes", "Artifact", "Age"],
        "the upgrade updated the CRD"
    );
    let source = &file_documents("crds/imageselectionpolicies.ocifit.io.yaml").unwrap()[0];
    let stored_spec = serde_json::to_value(&upgraded.spec).unwrap();
    assert_eq!(
        stored_spec["versions"], source["spec"]["versions"],
        "the stored CRD is the chart's"
    );
    let webhook =
        serde_json::to_value(configurations.get("ocifit").await.unwrap()).unwrap()["webhooks"][0]
            .clone();
    assert_eq!(webhook["timeoutSeconds"], 10);
    assert_eq!(
        webhook["clientConfig"]["caBundle"], ca_bundle,
        "the upgrade kept ocifit's caBundle"
    );
}

/// The stored webhook configuration on the real apiserver: its Service has no endpoints here, so
/// `Fail` refuses an opted-in pod, while pods that did not opt in, and opted-in pods in kube-system
/// and ocifit's own namespace, never reach it.
async fn without_endpoints_only_opted_in_pods_outside_system_namespaces_are_refused(
    client: &kube::Client,
) {
    ocifit_testkit::create_namespace(client, "apps")
        .await
        .unwrap();
    let refused = create_pod(client, "apps", "opted-in", true)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("failed calling webhook \"pods.ocifit.io\""),
        "{refused}"
    );
    assert!(
        refused.contains("ocifit-webhook.ocifit-system.svc"),
        "the Service is called: {refused}"
    );
    create_pod(client, "apps", "not-opted-in", false)
        .await
        .unwrap();
    create_pod(client, "kube-system", "opted-in", true)
        .await
        .unwrap();
    create_pod(client, NAMESPACE, "opted-in", true)
        .await
        .unwrap();
}

async fn the_uninstall_keeps_the_crd_and_users_policies(cluster: &Cluster) {
    let client = cluster.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    // No kubelet runs pods here, so the uninstall hook's Job could never complete: it is left
    // out, and tested where it runs, on the real node (chart_real_node).
    helm(
        &["uninstall", RELEASE, "--namespace", NAMESPACE, "--no-hooks"],
        Some(cluster.kubeconfig()),
    )
    .await
    .unwrap();

    assert!(
        crds.get_opt(CRD).await.unwrap().is_some(),
        "the CRD is kept"
    );
    assert!(
        Api::<ImageSelectionPolicy>::all(client.clone())
            .get_opt("flavors")
            .await
            .unwrap()
            .is_some(),
        "users' policies are kept"
    );
    assert!(
        Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
            .get_opt("ocifit-controller")
            .await
            .unwrap()
            .is_none()
    );
    assert!(configurations.get_opt("ocifit").await.unwrap().is_none());
}

/// Creates a pod with the placeholder image in `namespace` (and its default ServiceAccount, which
/// no controller-manager creates here), opted in to ocifit or not.
async fn create_pod(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    opted_in: bool,
) -> Result<Pod, kube::Error> {
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), namespace);
    if accounts.get_opt("default").await?.is_none() {
        let account = serde_json::from_value(json!({"metadata": {"name": "default"}}))
            .expect("a ServiceAccount");
        accounts.create(&PostParams::default(), &account).await?;
    }
    let pod = TestPod::named(name).without_token();
    let pod = if opted_in { pod.opted_in() } else { pod }.build();
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
}
