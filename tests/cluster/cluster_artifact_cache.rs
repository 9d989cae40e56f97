//! The ArtifactCache CRD in `crds/` on a real kube-apiserver: the example cache is stored with its
//! defaults and reads back as ocifit's Rust type, the workflow example's Jobs pass validation,
//! the CEL rules refuse contradictory specs with their messages, and `kubectl get ac` prints the
//! printer columns.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns fail the test loudly on bad setup

use std::path::PathBuf;

use kube::Api;
use ocifit::api::ArtifactCache;
use ocifit_testkit::{Cluster, SharedCluster, SharedClusterGuard, apply_crd_dir, create_namespace};

static CLUSTER: SharedCluster = SharedCluster::new(Cluster::builder);

/// The shared cluster with the repository's CRDs and the `workflow` namespace (idempotent).
async fn cluster() -> SharedClusterGuard {
    let cluster = CLUSTER.get().await.expect("the shared cluster");
    let client = cluster.client().unwrap();
    let names = apply_crd_dir(&client, &repo().join("crds")).await.unwrap();
    assert!(
        names.contains(&"artifactcaches.ocifit.io".to_string()),
        "{names:?}"
    );
    // A second test finds the namespace there already.
    let _ = create_namespace(&client, "workflow").await;
    cluster
}

fn repo() -> PathBuf {
    ocifit_testkit::repo_root()
}

fn cache(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: ocifit.io/v1alpha1\nkind: ArtifactCache\nmetadata:\n  name: {name}\n  namespace: workflow\nspec:\n{spec}"
    )
}

async fn refused(cluster: &SharedClusterGuard, manifest: &str) -> String {
    cluster
        .kubectl_with_input(["apply", "-f", "-"], manifest)
        .await
        .unwrap_err()
        .to_string()
}

#[tokio::test]
async fn the_example_cache_is_stored_with_its_defaults() {
    let cluster = cluster().await;
    let example = repo().join("example/artifacts/cache.yaml");
    cluster
        .kubectl(["apply", "-f", example.to_str().unwrap()])
        .await
        .unwrap();
    let stored = Api::<ArtifactCache>::namespaced(cluster.client().unwrap(), "workflow")
        .get("oras")
        .await
        .unwrap();
    assert!(stored.spec.deploy, "deploy defaults to true");
    assert!(!stored.spec.plain_http);
    assert!(stored.spec.storage.unwrap().empty_dir.is_some());

    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache("auth", "  htpasswdSecretRef: {name: cache-users}\n"),
        )
        .await
        .unwrap();
    let auth = Api::<ArtifactCache>::namespaced(cluster.client().unwrap(), "workflow")
        .get("auth")
        .await
        .unwrap();
    assert_eq!(auth.spec.htpasswd_secret_ref.unwrap().key, "htpasswd");
}

#[tokio::test]
async fn the_workflow_examples_jobs_pass_the_apiservers_validation() {
    let cluster = cluster().await;
    let example = repo().join("example/artifacts/workflow.yaml");
    let out = cluster
        .kubectl(["apply", "--dry-run=server", "-f", example.to_str().unwrap()])
        .await
        .unwrap();
    for job in ["step-one", "step-two"] {
        assert!(
            out.contains(&format!("job.batch/{job} created (server dry run)")),
            "{out}"
        );
    }
}

#[tokio::test]
async fn contradictory_specs_are_refused_by_the_cel_rules() {
    let cluster = cluster().await;
    let err = refused(
        &cluster,
        &cache("both", "  endpoint: registry.example.com\n"),
    )
    .await;
    assert!(
        err.contains("set endpoint exactly when deploy is false"),
        "{err}"
    );
    let err = refused(&cluster, &cache("nowhere", "  deploy: false\n")).await;
    assert!(
        err.contains("set endpoint exactly when deploy is false"),
        "{err}"
    );
    let err = refused(
        &cluster,
        &cache(
            "external-image",
            "  deploy: false\n  endpoint: registry.example.com\n  image: registry:3\n",
        ),
    )
    .await;
    assert!(err.contains("cannot be set with deploy: false"), "{err}");
    let err = refused(
        &cluster,
        &cache(
            "two-stores",
            "  storage:\n    emptyDir: {sizeLimit: 1Gi}\n    persistentVolumeClaim: {size: 1Gi}\n",
        ),
    )
    .await;
    assert!(
        err.contains("set exactly one of storage.emptyDir and storage.persistentVolumeClaim"),
        "{err}"
    );
    let err = refused(
        &cluster,
        &cache(
            "bad-endpoint",
            "  deploy: false\n  endpoint: \"https://x/y\"\n",
        ),
    )
    .await;
    assert!(err.contains("spec.endpoint"), "{err}");
}

#[tokio::test]
async fn kubectl_get_ac_prints_the_printer_columns() {
    let cluster = cluster().await;
    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &cache(
                "external",
                "  deploy: false\n  endpoint: 10.0.0.12:5000\n  plainHTTP: true\n",
            ),
        )
        .await
        .unwrap();
    let table = cluster
        .kubectl(["get", "ac", "-n", "workflow", "external"])
        .await
        .unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "ENDPOINT", "AGE"]);
    assert!(
        table.lines().nth(1).unwrap().starts_with("external "),
        "{table}"
    );
}
