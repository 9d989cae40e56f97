//! The Helm chart against the real local control plane (no kubelet runs its pods, so the stored
//! objects are what is checked): every value set's render passes `kubeconform -strict` with schemas
//! generated from this apiserver's OpenAPI and from the CRDs (ours, cert-manager's, the Prometheus
//! Operator's), never fetched; and `helm install` → `helm upgrade` → `helm uninstall` stores the
//! documented objects, upgrades an older CRD to the chart's, keeps a caBundle patched in by ocifit,
//! refuses opted-in pods while its Service is down but never touches other pods, kube-system or its
//! own namespace, and leaves the CRD and users' policies behind.

mod chart_support;

use std::path::Path;

use base64::Engine;
use chart_support::{
    NAMESPACE, RELEASE, VALUE_SETS, chart, documents, file_documents, find, helm, render, repo,
};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use ocifit::api::ImageSelectionPolicy;
use ocifit_testkit::pki::CertificateAuthority;
use ocifit_testkit::{Cluster, KubeconformSchemas, SharedCluster, Tool};
use serde_json::json;

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
        repo().join("crds/imageselectionpolicies.ocifit.io.yaml"),
        repo().join("crds/artifactcaches.ocifit.io.yaml"),
        tools.path(Tool::CertManagerCrds).unwrap(),
        tools.path(Tool::ServiceMonitorCrd).unwrap(),
    ];
    for file in &crds {
        assert!(
            schemas.add_crd_file(file).unwrap() > 0,
            "{}",
            file.display()
        );
    }

    for (name, sets) in VALUE_SETS {
        let manifests = render(sets).await.unwrap();
        let report = schemas
            .validate(&tools, &manifests)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let count = documents(&manifests).len();
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
    copy_dir(&chart(), &copy);
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
    let kubeconfig = Some(cluster.kubeconfig());
    let older = older_chart(cluster.dir());

    helm(
        &[
            "install",
            RELEASE,
            older.to_str().unwrap(),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
        ],
        kubeconfig,
    )
    .await
    .unwrap();

    // What the install stored.
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
    let rbac = file_documents("config/rbac/cluster_role.yaml");
    let cluster_role = Api::<ClusterRole>::all(client.clone())
        .get("ocifit-controller")
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&cluster_role.rules).unwrap(),
        find(&rbac, "ClusterRole", "ocifit-controller")["rules"]
    );
    let lease_role = Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .get("ocifit-leader-election")
        .await
        .unwrap();
    let leader = file_documents("config/rbac/leader_election_role.yaml");
    assert_eq!(
        serde_json::to_value(&lease_role.rules).unwrap(),
        find(&leader, "Role", "ocifit-leader-election")["rules"]
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

    // A user's policy, and the caBundle ocifit patches in (managed mode) under its own field manager.
    cluster
        .kubectl([
            "apply",
            "-f",
            repo().join("example/policy.yaml").to_str().unwrap(),
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

    helm(
        &[
            "upgrade",
            RELEASE,
            chart().to_str().unwrap(),
            "--namespace",
            NAMESPACE,
            "--set",
            "webhook.timeoutSeconds=10",
        ],
        kubeconfig,
    )
    .await
    .unwrap();

    let upgraded = crds.get(CRD).await.unwrap();
    assert_eq!(
        columns(&upgraded),
        ["Ready", "Classes", "Artifact", "Age"],
        "the upgrade updated the CRD"
    );
    let source = &file_documents("crds/imageselectionpolicies.ocifit.io.yaml")[0];
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
        webhook["clientConfig"]["caBundle"],
        ca_bundle.as_str(),
        "the upgrade kept ocifit's caBundle"
    );

    // The stored webhook configuration on the real apiserver: its Service has no endpoints here, so
    // `Fail` refuses an opted-in pod, while pods that did not opt in, and opted-in pods in kube-system
    // and ocifit's own namespace, never reach it.
    ocifit_testkit::create_namespace(&client, "apps")
        .await
        .unwrap();
    let refused = create_pod(&client, "apps", "opted-in", true)
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
    create_pod(&client, "apps", "not-opted-in", false)
        .await
        .unwrap();
    create_pod(&client, "kube-system", "opted-in", true)
        .await
        .unwrap();
    create_pod(&client, NAMESPACE, "opted-in", true)
        .await
        .unwrap();

    helm(
        &["uninstall", RELEASE, "--namespace", NAMESPACE],
        kubeconfig,
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
    let labels = if opted_in {
        json!({"oci.image.compatibilities.selection/enabled": "true"})
    } else {
        json!({})
    };
    let pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": "placeholder:latest"}],
        },
    }))
    .expect("a Pod");
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
}
