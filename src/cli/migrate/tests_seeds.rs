//! `ocifit migrate` over each seed's own documented spellings (`tests/fixtures/migrate/`, written
//! from the field names the seeds document): what is carried, what is not and why.

use serde_json::json;

use super::tests::{fixture, notes, objects, one};
use super::*;
use crate::api::{ArtifactCache, PlacementPolicy};

fn policy(migration: &Migration) -> PlacementPolicy {
    let objects = objects(migration);
    assert_eq!(objects.len(), 1, "{objects:#?}");
    serde_json::from_value(objects[0].clone()).unwrap()
}

#[test]
fn kube_arch_webhooks_readme_spelling_becomes_tolerations_and_required_labels() {
    let migration = translate(&fixture("kube-arch-webhook-values.yaml"));
    let policy = policy(&migration);
    let arm64 = &policy.spec.architectures[0];
    assert_eq!(arm64.name, "arm64");
    // A taint to tolerate becomes the toleration that tolerates it.
    let toleration = serde_json::to_value(&arm64.tolerations).unwrap();
    assert_eq!(
        toleration,
        json!([{"key": "ARM", "operator": "Equal", "value": "true", "effect": "NoExecute"}])
    );
    // One label map: carried, minus the architecture ocifit ANDs in itself.
    assert_eq!(
        serde_json::to_value(&arm64.require_node_labels).unwrap(),
        json!({"node.example.com/pool": "graviton"})
    );
    assert_eq!(policy.spec.tag_cache.if_not_present, "7d");
    let notes = notes(&migration);
    assert!(!notes.contains("no equivalent"), "{notes}");
    assert!(!notes.contains("not a map"), "{notes}");
    let carried = notes.split("Carried over: ").nth(1).unwrap_or_default();
    let carried = carried.split(" (each").next().unwrap_or_default();
    for key in [
        "architectures",
        "ifNotPresentCacheTime",
        "failurePolicy",
        "objectSelector",
    ] {
        assert!(carried.contains(key), "{key}: {notes}");
    }
    assert!(notes.contains("read as written"), "{notes}");
}

#[test]
fn label_sets_kube_arch_webhook_ors_are_named_not_narrowed_to_one() {
    let migration = translate(&one(json!({"architectures": {"arm64": {
        "taintsToTolerate": [{"key": "ARM", "effect": "NoSchedule"}],
        "requireNodeLabels": [
            {"kubernetes.io/arch": "arm64", "pool": "a"},
            {"kubernetes.io/arch": "arm64", "pool": "b"},
            {"kubernetes.io/arch": "amd64", "pool": "c"}
        ]
    }}})));
    let policy = policy(&migration);
    let arm64 = &policy.spec.architectures[0];
    assert!(arm64.require_node_labels.is_empty());
    // A taint without a value is tolerated whatever its value.
    assert_eq!(
        serde_json::to_value(&arm64.tolerations).unwrap(),
        json!([{"key": "ARM", "operator": "Exists", "effect": "NoSchedule"}])
    );
    let notes = notes(&migration);
    assert!(
        notes.contains("architectures.arm64.requireNodeLabels: [{") && notes.contains("ORs these"),
        "{notes}"
    );
}

#[test]
fn helm_get_values_output_gets_the_seeds_chart_defaults_and_says_why() {
    let migration = translate(&fixture("kube-arch-webhook-first-spelling.yaml"));
    let policy = policy(&migration);
    // Absent from `helm get values`: the seed's chart default, not ocifit's 24h.
    assert_eq!(policy.spec.tag_cache.if_not_present, "7d");
    let arm64 = &policy.spec.architectures[0];
    assert_eq!(arm64.tolerations[0].key.as_deref(), Some("ARM"));
    let notes = notes(&migration);
    assert!(
        notes.contains("`helm get values` prints only the values set at install"),
        "{notes}"
    );
    assert!(
        notes.contains("chart default is carried: ifNotPresentCacheTime: 7d"),
        "{notes}"
    );
}

#[test]
fn an_older_oras_cache_secret_is_the_registrys_http_secret() {
    let migration = translate(&fixture("oras-cache.yaml"));
    let objects = objects(&migration);
    let cache: ArtifactCache = serde_json::from_value(objects[2].clone()).unwrap();
    assert_eq!(cache.metadata.name.as_deref(), Some("oras"));
    let env: Vec<String> = cache
        .spec
        .env_secret_refs
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(env, ["oras-registry-http"]);
    assert_eq!(
        objects[3]["stringData"]["REGISTRY_HTTP_SECRET"],
        "an-older-http-secret"
    );
    let notes = notes(&migration);
    assert!(!notes.contains("spec.secret: an-older"), "{notes}");
    assert!(
        notes.contains("spec.secret: the oras-operator's first spelling"),
        "{notes}"
    );
}

#[test]
fn a_cache_that_deploys_nothing_says_which_label_opts_its_namespace_in() {
    let migration = translate(&fixture("oras-cache.yaml"));
    let note = migration
        .objects
        .iter()
        .flat_map(|o| o.notes.iter())
        .find(|n| n.contains("has deploy: false"))
        .unwrap();
    assert!(
        note.contains("kubectl label namespace remote artifacts.ocifit.io/steps=enabled"),
        "{note}"
    );
}

#[test]
fn ocifit_k8s_install_is_replaced_object_by_object_by_the_chart() {
    let documents = fixture("ocifit-k8s-webhook.yaml");
    let migration = translate(&documents);
    assert!(objects(&migration).is_empty());
    let notes: Vec<&String> = migration.objects.iter().flat_map(|o| &o.notes).collect();
    assert_eq!(notes.len(), documents.len(), "{notes:#?}");
    for note in &notes {
        assert!(note.contains("part of ocifit-k8s's install"), "{note}");
        assert!(!note.contains("left out"), "{note}");
    }
    let webhook = notes
        .iter()
        .find(|n| n.contains("MutatingWebhookConfiguration"))
        .unwrap();
    assert!(webhook.contains("pods.ocifit.io"), "{webhook}");
}

#[test]
fn ocifit_k8s_model_server_is_said_to_be_refused() {
    let migration = translate(&one(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "ocifit-k8s-deployment"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "ml-server", "image": "registry.example.com/model-server:1"},
            {"name": "ocifit-webhook", "image": "ghcr.io/compspec/ocifit-k8s:latest",
             "env": [{"name": "MODEL_SERVER_URL", "value": "http://localhost:5000"}]}
        ]}}}
    })));
    let notes = notes(&migration);
    assert!(notes.contains("ModelUnsupported"), "{notes}");
}

#[test]
fn archaware_without_the_cluster_spares_amd64_and_says_how_to_check() {
    let migration = translate(&fixture("archaware-controller.yaml"));
    let policy = policy(&migration);
    assert_eq!(policy.spec.node_tainting.unwrap().architectures, ["arm"]);
    let notes = notes(&migration);
    assert!(notes.contains("amd64 left untainted"), "{notes}");
    assert!(
        notes.contains("kubectl get pods,daemonsets -A -o yaml | ocifit migrate"),
        "{notes}"
    );
}

#[test]
fn archaware_with_the_cluster_spares_what_system_pods_need_and_names_the_rest() {
    let mut documents = fixture("archaware-controller.yaml");
    documents.extend(fixture("archaware-cluster.yaml"));
    let migration = translate(&documents);
    let policy = policy(&migration);
    // Sparing arm strands no kube-system pod (CoreDNS runs anywhere, the agent only on arm).
    assert_eq!(policy.spec.node_tainting.unwrap().architectures, ["amd64"]);
    let notes = notes(&migration);
    let stranded: Vec<&str> = notes
        .lines()
        .filter(|line| line.starts_with("stranded: "))
        .collect();
    assert_eq!(stranded.len(), 1, "{notes}");
    assert!(
        stranded[0].starts_with("stranded: DaemonSet kube-system/net-plugin:")
            && stranded[0].contains("nodes of amd64"),
        "{notes}"
    );
    assert!(!notes.contains("left out"), "{notes}");
}

#[test]
fn a_system_pod_every_choice_would_strand_is_named() {
    let pod = |name: &str, arch: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "kube-system"},
               "spec": {"nodeSelector": {"kubernetes.io/arch": arch},
                        "containers": [{"name": "c", "image": "i"}]}})
    };
    let mut documents = fixture("archaware-controller.yaml");
    documents.extend(one(json!({"apiVersion": "v1", "kind": "List", "items": [
        pod("on-arm", "arm"),
        pod("on-amd64", "amd64"),
        // Tolerating ocifit's taint, it is never stranded.
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "tolerant", "namespace": "kube-system"},
         "spec": {"nodeSelector": {"kubernetes.io/arch": "arm"},
                  "tolerations": [{"key": "placement.ocifit.io/arch", "operator": "Exists"}],
                  "containers": [{"name": "c", "image": "i"}]}}
    ]})));
    let migration = translate(&documents);
    let policy = policy(&migration);
    assert_eq!(policy.spec.node_tainting.unwrap().architectures, ["arm"]);
    let notes = notes(&migration);
    assert!(
        notes.contains("stranded: Pod kube-system/on-arm: every architecture it may run on (arm)"),
        "{notes}"
    );
    assert!(!notes.contains("on-amd64:"), "{notes}");
    assert!(!notes.contains("tolerant:"), "{notes}");
}

#[test]
fn pods_without_archaware_controller_are_left_out_saying_when_they_are_read() {
    let migration = translate(&one(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "kube-system"}}),
    ));
    let notes = notes(&migration);
    assert!(
        notes.contains("left out (Pods and DaemonSets are read only beside"),
        "{notes}"
    );
}
