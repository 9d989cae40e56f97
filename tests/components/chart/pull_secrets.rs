//! Pull Secrets are readable with `get` only, in the namespaces `pullSecrets.namespaces` names
//! (default the release namespace), or everywhere with `get` only when it holds `*`; no rule
//! anywhere lists or watches Secrets beyond the webhook's own one by name.

use serde_json::{Value, json};

use ocifit_testkit::chart::NAMESPACE;

use super::{documents, has, render};

/// The namespaces of the Roles named `ocifit-pull-secrets`, each checked to grant `get` only.
fn pull_secret_role_namespaces(rendered: &[Value]) -> Vec<String> {
    let get_only = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]);
    rendered
        .iter()
        .filter(|d| d["kind"] == "Role" && d["metadata"]["name"] == "ocifit-pull-secrets")
        .map(|role| {
            assert_eq!(role["rules"], get_only);
            role["metadata"]["namespace"]
                .as_str()
                .expect("a namespace")
                .to_owned()
        })
        .collect()
}

fn flags(rendered: &[Value]) -> Vec<String> {
    let deployment = rendered
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| a.starts_with("--pull-secret-namespaces"))
        .map(str::to_owned)
        .collect()
}

/// No rule grants list or watch on Secrets, except on resource names.
fn no_secret_list_or_watch(rendered: &[Value]) {
    for document in rendered {
        for rule in document["rules"].as_array().into_iter().flatten() {
            let secrets = rule["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r == "secrets"));
            let named = rule.get("resourceNames").is_some();
            let lists = rule["verbs"]
                .as_array()
                .is_some_and(|v| v.iter().any(|v| v == "list" || v == "watch" || v == "*"));
            assert!(!(secrets && lists && !named), "{document}");
        }
    }
}

#[tokio::test]
async fn by_default_pull_secrets_are_read_with_get_in_the_release_namespace_only() {
    let rendered = documents(&render(&[]).await.unwrap());
    assert_eq!(pull_secret_role_namespaces(&rendered), [NAMESPACE]);
    assert!(flags(&rendered).is_empty(), "the operator's default");
    assert!(!has(&rendered, "ClusterRole", "ocifit-pull-secrets"));
    no_secret_list_or_watch(&rendered);
}

#[tokio::test]
async fn listed_namespaces_each_get_a_role_and_reach_the_flag() {
    let rendered = documents(
        &render(&["pullSecrets.namespaces={team-a,team-b}"])
            .await
            .unwrap(),
    );
    assert_eq!(pull_secret_role_namespaces(&rendered), ["team-a", "team-b"]);
    assert_eq!(
        flags(&rendered),
        [
            "--pull-secret-namespaces=team-a",
            "--pull-secret-namespaces=team-b"
        ]
    );
    no_secret_list_or_watch(&rendered);
}

#[tokio::test]
async fn every_namespace_is_a_cluster_role_with_get_only() {
    let rendered = documents(&render(&["pullSecrets.namespaces={*}"]).await.unwrap());
    assert!(pull_secret_role_namespaces(&rendered).is_empty());
    let role = rendered
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "ocifit-pull-secrets")
        .expect("the ClusterRole");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])
    );
    assert!(has(&rendered, "ClusterRoleBinding", "ocifit-pull-secrets"));
    assert_eq!(flags(&rendered), ["--pull-secret-namespaces=*"]);
    no_secret_list_or_watch(&rendered);
}
