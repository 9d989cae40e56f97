//! The ImageSelectionPolicy CRD in `crds/` on a real kube-apiserver: it is accepted (a structural
//! schema) and Established; the example policy is stored and reads back as ocifit's Rust type;
//! invalid policies are rejected with the schema's and the CEL rules' messages; and `kubectl get isp`
//! prints the printer columns; every example object (policies, pods, the extra node) passes the
//! apiserver's validation as written.

use kube::Api;
use ocifit::api::ImageSelectionPolicy;
use ocifit_testkit::{Cluster, SharedCluster, SharedClusterGuard, apply_crd_dir};

static CLUSTER: SharedCluster = SharedCluster::new(Cluster::builder);

/// The shared cluster with the repository's CRDs applied (idempotent, so every test may ask).
async fn cluster_with_crds() -> SharedClusterGuard {
    let cluster = CLUSTER.get().await.expect("the shared cluster");
    let crds = ocifit_testkit::repo_root().join("crds");
    let client = cluster.client().expect("a kube client");
    let names = apply_crd_dir(&client, &crds)
        .await
        .expect("the apiserver accepts crds/");
    assert!(
        names.contains(&"imageselectionpolicies.ocifit.io".to_string()),
        "{names:?}"
    );
    cluster
}

/// A policy named `name` with the given `spec` YAML (indented for `spec:`).
fn policy(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: ocifit.io/v1alpha1\nkind: ImageSelectionPolicy\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[tokio::test]
async fn the_example_policy_is_stored_and_reads_back_as_the_rust_type() {
    let cluster = cluster_with_crds().await;
    let example = ocifit_testkit::repo_root().join("example/policy.yaml");

    cluster
        .kubectl(["apply", "-f", example.to_str().unwrap()])
        .await
        .unwrap();

    let stored = Api::<ImageSelectionPolicy>::all(cluster.client().unwrap())
        .get("flavors")
        .await
        .unwrap();
    assert_eq!(stored.spec.target_image, "placeholder:latest");
    assert_eq!(
        stored.spec.artifact.reference.as_deref(),
        Some("127.0.0.1:5000/ocifit/flavor-compat:v1")
    );
}

#[tokio::test]
async fn every_example_policy_pod_and_node_passes_the_apiservers_validation() {
    let cluster = cluster_with_crds().await;
    let example = ocifit_testkit::repo_root().join("example");
    let paths = ["policy.yaml", "policies", "pods", "mint-node.yaml"]
        .map(|path| example.join(path).to_str().unwrap().to_owned());

    let mut args = vec!["apply", "--dry-run=server"];
    for path in &paths {
        args.extend(["-f", path.as_str()]);
    }
    let out = cluster.kubectl(args).await.unwrap();

    for pod in std::fs::read_dir(example.join("pods")).unwrap() {
        let name = pod.unwrap().path();
        let name = name.file_stem().unwrap().to_str().unwrap();
        assert!(
            out.contains(&format!("pod/{name} created (server dry run)")),
            "{name}: {out}"
        );
    }
    for policy in [
        "flavors",
        "flavors-strict",
        "flavors-fallback",
        "flavors-allow",
    ] {
        assert!(
            out.contains(&format!("imageselectionpolicy.ocifit.io/{policy} ")),
            "{out}"
        );
    }
    assert!(
        out.contains("node/worker-mint created (server dry run)"),
        "{out}"
    );
}

#[tokio::test]
async fn a_policy_with_both_ref_and_candidates_is_rejected_by_the_cel_rule() {
    let cluster = cluster_with_crds().await;
    let both = policy(
        "both-sources",
        "  targetImage: placeholder:latest\n  artifact:\n    ref: 127.0.0.1:5000/compat:v1\n    candidates:\n    - image: 127.0.0.1:5000/app:v1\n",
    );

    let err = cluster
        .kubectl_with_input(["apply", "-f", "-"], &both)
        .await
        .unwrap_err()
        .to_string();

    assert!(
        err.contains("exactly one of artifact.ref and artifact.candidates must be set"),
        "{err}"
    );
}

#[tokio::test]
async fn a_policy_with_an_empty_target_image_is_rejected_by_the_schema() {
    let cluster = cluster_with_crds().await;
    let empty = policy(
        "empty-target",
        "  targetImage: \"\"\n  artifact:\n    ref: 127.0.0.1:5000/compat:v1\n",
    );

    let err = cluster
        .kubectl_with_input(["apply", "-f", "-"], &empty)
        .await
        .unwrap_err()
        .to_string();

    assert!(err.contains("spec.targetImage"), "{err}");
    assert!(err.contains("at least 1 chars long"), "{err}");
}

#[tokio::test]
async fn kubectl_get_isp_prints_the_printer_columns() {
    let cluster = cluster_with_crds().await;
    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &policy(
                "columns",
                "  targetImage: placeholder:latest\n  artifact:\n    ref: 127.0.0.1:5000/compat:v1\n",
            ),
        )
        .await
        .unwrap();

    let table = cluster.kubectl(["get", "isp", "columns"]).await.unwrap();

    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "CLASSES", "ARTIFACT", "AGE"]);
    assert!(
        table.lines().nth(1).unwrap().starts_with("columns "),
        "{table}"
    );
}
