//! The guaranteed way out of platform placement, on a real kube-apiserver: the command
//! `docs/placement.md` gives for releasing every gate ocifit added is run verbatim (bash and the
//! built kubectl, nothing of ocifit), and it removes ocifit's gate from every pod that has it,
//! in every namespace, while other gates, other pods and the pods' other fields stay as they were;
//! `ocifit placement release-all`, the same way out as one command (a deprecated alias of
//! `ocifit release-gates --gate placement`, saying so), does exactly the same;
//! `ocifit release-gates --dry-run` lists what it would release and changes nothing; a pod
//! it may not patch does not stop it: every other pod is released, the failure named, the exit
//! status non-zero. `ocifit placement untaint` removes ocifit's node-tainting taint from every
//! node and no other taint.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount, Taint};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::PostParams;
use ocifit::api::placement_pod::{POLICY_LABEL, SCHEDULING_GATE, TAINT_KEY};
use ocifit_testkit::{Cluster, FakeNode, Tool};
use serde_json::json;

use crate::support::placement::gates;
use crate::support::succeeded;

/// The shell block the docs mark as the release-all command.
fn documented_command() -> String {
    let docs =
        std::fs::read_to_string(ocifit_testkit::repo_root().join("docs/placement.md")).unwrap();
    let marker = "<!-- release-all:";
    let after = &docs[docs.find(marker).expect("the docs mark the command")..];
    let start = after.find("```sh\n").unwrap() + "```sh\n".len();
    let end = after[start..].find("```").unwrap();
    after[start..start + end].to_owned()
}

async fn create(pods: &Api<Pod>, name: &str, labelled: bool, gates: &[&str]) {
    let mut labels = json!({"app": "web"});
    if labelled {
        labels[POLICY_LABEL] = json!("default");
    }
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "containers": [{"name": "web", "image": "registry.example.com/web:v1"}],
            "schedulingGates": gates.iter().map(|g| json!({"name": g})).collect::<Vec<_>>(),
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

/// Five pods in two namespaces: ocifit's gate alone, beside another gate, on a released pod,
/// and a pod ocifit never touched with someone else's gate.
async fn gated_pods() -> (Cluster, Api<Pod>, Api<Pod>) {
    let cluster = Cluster::builder().start().await.unwrap();
    let client = cluster.client().unwrap();
    for namespace in ["shop", "batch"] {
        ocifit_testkit::create_namespace(&client, namespace)
            .await
            .unwrap();
    }
    let shop: Api<Pod> = Api::namespaced(client.clone(), "shop");
    let batch: Api<Pod> = Api::namespaced(client.clone(), "batch");
    create(&shop, "gated", true, &[SCHEDULING_GATE]).await;
    create(
        &shop,
        "two-gates",
        true,
        &["example.com/quota", SCHEDULING_GATE],
    )
    .await;
    create(&batch, "gated", true, &[SCHEDULING_GATE]).await;
    create(&batch, "released", true, &[]).await;
    create(&batch, "someone-elses", false, &["example.com/quota"]).await;

    (cluster, shop, batch)
}

/// Every ocifit gate is gone, the other gates and the policy label stay.
async fn released_ocifits_gates_only(shop: &Api<Pod>, batch: &Api<Pod>) {
    assert!(gates(&shop.get("gated").await.unwrap()).is_empty());
    assert_eq!(
        gates(&shop.get("two-gates").await.unwrap()),
        ["example.com/quota"]
    );
    assert!(gates(&batch.get("gated").await.unwrap()).is_empty());
    assert_eq!(
        gates(&batch.get("someone-elses").await.unwrap()),
        ["example.com/quota"],
        "a gate ocifit did not add stays"
    );
    let released = shop.get("gated").await.unwrap();
    assert_eq!(
        released.metadata.labels.unwrap()[POLICY_LABEL],
        "default",
        "the record of the policy stays"
    );
}

#[tokio::test]
async fn the_documented_command_releases_every_ocifit_gate_and_nothing_else() {
    let (cluster, shop, batch) = gated_pods().await;
    let kubectl = cluster.tools().path(Tool::Kubectl).unwrap();
    let path = format!(
        "{}:{}",
        kubectl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = tokio::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &documented_command()])
        .env("PATH", path)
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .await
        .unwrap();
    let stdout = succeeded("the documented command", &output);
    assert_eq!(stdout.matches("patched").count(), 3, "{stdout}");

    released_ocifits_gates_only(&shop, &batch).await;
}

#[tokio::test]
async fn ocifit_placement_release_all_releases_every_ocifit_gate_and_nothing_else() {
    let (cluster, shop, batch) = gated_pods().await;
    let output = run_ocifit(&["placement", "release-all"], cluster.kubeconfig()).await;
    let stdout = succeeded("ocifit placement release-all", &output);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(ocifit::cli::RELEASE_ALL_DEPRECATED),
        "the deprecated alias says so: {output:?}"
    );
    assert!(stdout.contains("released shop/gated"), "{stdout}");
    assert!(stdout.ends_with("3 pod(s) released\n"), "{stdout}");
    released_ocifits_gates_only(&shop, &batch).await;
}

/// `ocifit release-gates` (what the chart's uninstall hook runs) also frees the pods image
/// selection holds, and a pod held by both features loses both gates, every other gate kept;
/// its dry run (in every namespace, or `-n` one) lists them and releases none.
#[tokio::test]
async fn ocifit_release_gates_also_releases_the_pods_image_selection_holds() {
    use ocifit::api::pod::{HELD_LABEL, SCHEDULING_GATE as IMAGE_GATE};
    let (cluster, shop, batch) = gated_pods().await;
    for (name, gates, placement) in [
        ("held", vec![IMAGE_GATE], false),
        (
            "held-twice",
            vec![SCHEDULING_GATE, "example.com/quota", IMAGE_GATE],
            true,
        ),
    ] {
        let mut labels = json!({"app": "web", HELD_LABEL: "true"});
        if placement {
            labels[POLICY_LABEL] = json!("default");
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "containers": [{"name": "web", "image": "registry.example.com/web:v1"}],
                "schedulingGates": gates.iter().map(|g| json!({"name": g})).collect::<Vec<_>>(),
            }
        }))
        .unwrap();
        shop.create(&PostParams::default(), &pod).await.unwrap();
    }
    // A dry run lists every pod it would release and changes none; `-n` keeps to one namespace.
    let dry = ocifit(&["release-gates", "--dry-run"], cluster.kubeconfig()).await;
    assert!(
        dry.contains("would release shop/held (selection.ocifit.io/image)"),
        "{dry}"
    );
    assert!(
        dry.ends_with("5 pod(s) would be released (dry run: nothing changed)\n"),
        "{dry}"
    );
    assert_eq!(gates(&shop.get("held").await.unwrap()), [IMAGE_GATE]);
    assert_eq!(gates(&shop.get("gated").await.unwrap()), [SCHEDULING_GATE]);
    assert_eq!(gates(&batch.get("gated").await.unwrap()), [SCHEDULING_GATE]);
    let one_namespace = ocifit(
        &["-n", "batch", "release-gates", "--dry-run", "-o", "json"],
        cluster.kubeconfig(),
    )
    .await;
    let report: serde_json::Value = serde_json::from_str(&one_namespace).unwrap();
    assert_eq!(report["dryRun"], true);
    assert_eq!(
        report["released"],
        json!([{"pod": "batch/gated", "gate": SCHEDULING_GATE}]),
        "{one_namespace}"
    );

    let stdout = ocifit(&["release-gates"], cluster.kubeconfig()).await;
    assert!(
        stdout.contains("released shop/held (selection.ocifit.io/image)"),
        "{stdout}"
    );
    assert!(stdout.ends_with("5 pod(s) released\n"), "{stdout}");
    released_ocifits_gates_only(&shop, &batch).await;
    assert!(gates(&shop.get("held").await.unwrap()).is_empty());
    assert_eq!(
        gates(&shop.get("held-twice").await.unwrap()),
        ["example.com/quota"]
    );
}

/// Runs `ocifit ARGS --kubeconfig KUBECONFIG` to its end.
async fn run_ocifit(args: &[&str], kubeconfig: &Path) -> Output {
    tokio::process::Command::new(crate::support::ocifit_binary())
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .await
        .expect("ocifit runs")
}

/// The standard output of `ocifit ARGS --kubeconfig KUBECONFIG`, which must succeed.
async fn ocifit(args: &[&str], kubeconfig: &Path) -> String {
    succeeded(
        &format!("ocifit {args:?}"),
        &run_ocifit(args, kubeconfig).await,
    )
}

/// Creates `object` from JSON through `api`.
async fn apply<K>(api: Api<K>, object: serde_json::Value)
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

#[tokio::test]
async fn release_all_goes_on_after_a_pod_it_may_not_patch_and_reports_it() {
    let cluster = Cluster::builder().start().await.unwrap();
    let client = cluster.client().unwrap();
    // Listed in namespace order: the pod it may not patch comes first.
    for namespace in ["a-locked", "b-open", "releaser"] {
        ocifit_testkit::create_namespace(&client, namespace)
            .await
            .unwrap();
    }
    let locked: Api<Pod> = Api::namespaced(client.clone(), "a-locked");
    let open: Api<Pod> = Api::namespaced(client.clone(), "b-open");
    create(&locked, "gated", true, &[SCHEDULING_GATE]).await;
    create(&open, "gated", true, &[SCHEDULING_GATE]).await;
    create(&open, "also-gated", true, &[SCHEDULING_GATE]).await;
    // A ServiceAccount that lists pods everywhere but patches them only in b-open.
    apply(
        Api::<ServiceAccount>::namespaced(client.clone(), "releaser"),
        json!({"metadata": {"name": "releaser"}}),
    )
    .await;
    apply(
        Api::<ClusterRole>::all(client.clone()),
        json!({"metadata": {"name": "list-pods"},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
    )
    .await;
    let subject = json!([{"kind": "ServiceAccount", "name": "releaser", "namespace": "releaser"}]);
    apply(
        Api::<ClusterRoleBinding>::all(client.clone()),
        json!({"metadata": {"name": "list-pods"}, "subjects": subject,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "list-pods"}}),
    )
    .await;
    apply(
        Api::<Role>::namespaced(client.clone(), "b-open"),
        json!({"metadata": {"name": "patch-pods"},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]}),
    )
    .await;
    apply(
        Api::<RoleBinding>::namespaced(client.clone(), "b-open"),
        json!({"metadata": {"name": "patch-pods"}, "subjects": subject,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "patch-pods"}}),
    )
    .await;
    let kubeconfig =
        crate::support::access::service_account_kubeconfig(&cluster, "releaser", "releaser").await;

    let output = run_ocifit(&["placement", "release-all"], &kubeconfig).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("failed to remove the gate from pod a-locked/gated"),
        "{stderr}"
    );
    assert!(stdout.ends_with("2 pod(s) released\n"), "{stdout}");
    assert!(gates(&open.get("gated").await.unwrap()).is_empty());
    assert!(gates(&open.get("also-gated").await.unwrap()).is_empty());
    assert_eq!(
        gates(&locked.get("gated").await.unwrap()),
        [SCHEDULING_GATE],
        "the pod it may not patch keeps its gate"
    );
}

/// A node of `arch` with these taints (key, value), all `NoSchedule`.
async fn tainted_node(nodes: &Api<Node>, name: &str, arch: &str, taints: &[(&str, &str)]) {
    let mut node = FakeNode::new(name)
        .label("kubernetes.io/arch", arch)
        .to_node();
    node.spec.get_or_insert_default().taints = Some(
        taints
            .iter()
            .map(|(key, value)| Taint {
                key: (*key).to_owned(),
                value: Some((*value).to_owned()),
                effect: "NoSchedule".to_owned(),
                time_added: None,
            })
            .collect(),
    );
    nodes.create(&PostParams::default(), &node).await.unwrap();
}

/// The taint keys of node `name`.
async fn taint_keys(nodes: &Api<Node>, name: &str) -> Vec<String> {
    nodes
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|spec| spec.taints)
        .unwrap_or_default()
        .into_iter()
        .map(|taint| taint.key)
        .collect()
}

#[tokio::test]
async fn ocifit_placement_untaint_removes_ocifits_taint_from_every_node_and_nothing_else() {
    let cluster = Cluster::builder().start().await.unwrap();
    let nodes: Api<Node> = Api::all(cluster.client().unwrap());
    tainted_node(&nodes, "arm-alone", "arm64", &[(TAINT_KEY, "arm64")]).await;
    tainted_node(
        &nodes,
        "arm-pool",
        "arm64",
        &[("pool", "arm"), (TAINT_KEY, "arm64")],
    )
    .await;
    tainted_node(&nodes, "s390x", "s390x", &[(TAINT_KEY, "s390x")]).await;
    tainted_node(&nodes, "gpu", "amd64", &[("gpu", "yes")]).await;

    let stdout = ocifit(&["placement", "untaint"], cluster.kubeconfig()).await;
    assert!(stdout.contains("untainted arm-pool\n"), "{stdout}");
    assert!(stdout.ends_with("3 node(s) untainted\n"), "{stdout}");
    assert!(taint_keys(&nodes, "arm-alone").await.is_empty());
    assert_eq!(taint_keys(&nodes, "arm-pool").await, ["pool"]);
    assert!(taint_keys(&nodes, "s390x").await.is_empty());
    assert_eq!(
        taint_keys(&nodes, "gpu").await,
        ["gpu"],
        "a taint ocifit did not add stays"
    );
}
