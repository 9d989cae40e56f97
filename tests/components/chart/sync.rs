//! The chart stays equal to what it is built from or generates: the CRD of `crds/`, the RBAC of
//! `config/rbac/`, `config/install.yaml` and the chart README's values table.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use serde_json::Value;

use ocifit_testkit::chart::{NAMESPACE, chart_dir as chart, render_without_hooks};
use ocifit_testkit::repo_root as repo;

use super::generated::{self, HOW};
use super::{documents, file_documents, find, has, render};

/// The CRD files of `crds/`, by file name.
const CRD_FILES: [&str; 3] = [
    "artifactcaches.ocifit.io.yaml",
    "imageselectionpolicies.ocifit.io.yaml",
    "placementpolicies.ocifit.io.yaml",
];

#[test]
fn the_charts_crd_files_are_the_repositorys_crds() {
    for file in CRD_FILES {
        let ours = std::fs::read_to_string(repo().join("crds").join(file)).unwrap();
        let copy = std::fs::read_to_string(chart().join("files").join(file)).unwrap();
        assert!(
            ours == copy,
            "charts/ocifit/files/{file} differs from crds/; copy it: cp crds/{file} charts/ocifit/files/"
        );
    }
}

#[tokio::test]
async fn the_rendered_crds_are_crds_with_the_keep_policy_and_can_be_left_out() {
    let rendered = documents(&render(&[]).await.unwrap());
    for file in CRD_FILES {
        let name = file.trim_end_matches(".yaml");
        let crd = find(&rendered, "CustomResourceDefinition", name);
        let source = &file_documents(&format!("crds/{file}"))[0];

        // Compared as the typed spec: Helm writes the schema's `maximum: 100.0` as `100`.
        let spec = |value: &Value| -> CustomResourceDefinitionSpec {
            serde_json::from_value(value["spec"].clone()).unwrap()
        };
        assert_eq!(spec(crd), spec(source), "{name}");
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{name}"
        );
    }

    let without = documents(&render(&["crds.install=false"]).await.unwrap());
    assert!(
        !without
            .iter()
            .any(|d| d["kind"] == "CustomResourceDefinition")
    );
}

/// The `rules` of the `kind` named `name` in a config/rbac file.
fn config_rules(file: &str, kind: &str, name: &str) -> Value {
    find(&file_documents(file), kind, name)["rules"].clone()
}

#[tokio::test]
async fn rendered_rbac_is_config_rbac() {
    let rendered = documents(&render(&[]).await.unwrap());

    for (file, kind, name) in [
        (
            "config/rbac/cluster_role.yaml",
            "ClusterRole",
            "ocifit-controller",
        ),
        (
            "config/rbac/leader_election_role.yaml",
            "Role",
            "ocifit-leader-election",
        ),
        (
            "config/rbac/webhook_certificates_role.yaml",
            "Role",
            "ocifit-webhook-certificates",
        ),
        (
            "config/rbac/pull_secrets_role.yaml",
            "Role",
            "ocifit-pull-secrets",
        ),
        (
            "config/rbac/webhook_certificates_role.yaml",
            "ClusterRole",
            "ocifit-webhook-certificates",
        ),
    ] {
        assert_eq!(
            find(&rendered, kind, name)["rules"],
            config_rules(file, kind, name),
            "{kind} {name} differs from {file}"
        );
    }
    for (file, kind, name) in [
        (
            "config/rbac/cluster_role_binding.yaml",
            "ClusterRoleBinding",
            "ocifit-controller",
        ),
        (
            "config/rbac/leader_election_role_binding.yaml",
            "RoleBinding",
            "ocifit-leader-election",
        ),
        (
            "config/rbac/webhook_certificates_role_binding.yaml",
            "RoleBinding",
            "ocifit-webhook-certificates",
        ),
        (
            "config/rbac/pull_secrets_role_binding.yaml",
            "RoleBinding",
            "ocifit-pull-secrets",
        ),
        (
            "config/rbac/webhook_certificates_role_binding.yaml",
            "ClusterRoleBinding",
            "ocifit-webhook-certificates",
        ),
    ] {
        let ours = find(&rendered, kind, name);
        let theirs = file_documents(file);
        let theirs = find(&theirs, kind, name);
        assert_eq!(ours["roleRef"], theirs["roleRef"], "{kind} {name}");
        assert_eq!(ours["subjects"], theirs["subjects"], "{kind} {name}");
    }
    let sa = file_documents("config/rbac/service_account.yaml");
    let sa = find(&sa, "ServiceAccount", "ocifit-controller");
    assert_eq!(
        find(&rendered, "ServiceAccount", "ocifit-controller")["metadata"]["namespace"],
        sa["metadata"]["namespace"]
    );
}

/// The admission policy that narrows ocifit's own ServiceAccount is the one the cluster test runs
/// under (`config/rbac/admission_policy.yaml`), names that ServiceAccount and the registry images
/// the chart allows, and can be left out (below Kubernetes 1.30).
#[tokio::test]
async fn rendered_admission_policy_is_config_rbacs_and_follows_the_values() {
    let rendered = documents(&render(&[]).await.unwrap());
    let file = file_documents("config/rbac/admission_policy.yaml");
    for kind in [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert_eq!(
            find(&rendered, kind, "ocifit-least-power")["spec"],
            find(&file, kind, "ocifit-least-power")["spec"],
            "{kind} differs from config/rbac/admission_policy.yaml"
        );
    }
    let other = documents(
        &render(&["artifactCache.registryImages={mirror.example/registry:3}"])
            .await
            .unwrap(),
    );
    let policy = serde_json::to_string(
        &find(&other, "ValidatingAdmissionPolicy", "ocifit-least-power")["spec"],
    )
    .unwrap();
    assert!(policy.contains("mirror.example/registry:3"), "{policy}");
    assert!(!policy.contains("docker.io/library/registry"), "{policy}");
    let without = documents(&render(&["admissionPolicy.enabled=false"]).await.unwrap());
    assert!(!has(
        &without,
        "ValidatingAdmissionPolicy",
        "ocifit-least-power"
    ));
    assert!(!has(
        &without,
        "ValidatingAdmissionPolicyBinding",
        "ocifit-least-power"
    ));
}

#[tokio::test]
async fn certificate_write_access_exists_only_when_ocifit_manages_the_certificate() {
    for mode in [
        &["tls.mode=certManager"][..],
        &[
            "tls.mode=secret",
            "tls.secret.name=mine",
            "tls.secret.caBundle=Y2E=",
        ],
    ] {
        let rendered = documents(&render(mode).await.unwrap());
        assert!(
            !has(&rendered, "Role", "ocifit-webhook-certificates"),
            "{mode:?}"
        );
        assert!(
            !has(&rendered, "ClusterRole", "ocifit-webhook-certificates"),
            "{mode:?}"
        );
    }
}

#[tokio::test]
async fn generated_config_install_yaml_is_the_chart_with_default_values() {
    let expected = format!(
        "{}{}",
        generated::INSTALL_HEADER,
        render_without_hooks(&[]).await.unwrap()
    );
    let path = repo().join("config/install.yaml");
    if generated::regenerating() {
        std::fs::write(&path, &expected).unwrap();
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "config/install.yaml is not the chart's default render; {HOW}"
    );
}

#[tokio::test]
async fn generated_config_kustomization_builds_the_namespace_and_the_install() {
    let kubectl = ocifit_testkit::Tools::locate()
        .expect("the tools cache")
        .path(ocifit_testkit::Tool::Kubectl)
        .unwrap();
    let output = tokio::process::Command::new(kubectl)
        .args(["kustomize", repo().join("config").to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let built = documents(&String::from_utf8(output.stdout).unwrap());
    let install = documents(&render_without_hooks(&[]).await.unwrap());

    assert!(has(&built, "Namespace", NAMESPACE));
    assert_eq!(
        built.len(),
        install.len() + 1,
        "the namespace and the chart's objects"
    );
}

#[test]
fn generated_chart_readme_values_table_documents_every_commented_value() {
    let values = std::fs::read_to_string(chart().join("values.yaml")).unwrap();
    let table = generated::values_table(&values);
    let readme_path = chart().join("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let expected = generated::replace_between_markers(&readme, &table)
        .expect("charts/ocifit/README.md has the values table markers");
    if generated::regenerating() {
        std::fs::write(&readme_path, &expected).unwrap();
    }
    assert!(
        std::fs::read_to_string(&readme_path).unwrap() == expected,
        "charts/ocifit/README.md's values table is out of date with values.yaml; {HOW}"
    );
    assert!(
        table.contains("| `webhook.failurePolicy` | `\"Fail\"` |"),
        "{table}"
    );
    assert!(table.contains("| `tls.mode` | `\"managed\"` |"), "{table}");
}
