//! The CRDs in `crds/` (ImageSelectionPolicy, PlacementPolicy, ArtifactCache) on a real kube-apiserver: they are
//! accepted (structural schemas) and Established; the example policies are stored and read back as
//! ocifit's Rust types, with defaults filled in; invalid policies are rejected with the schema's and
//! the CEL rules' messages; `kubectl get isp` and `kubectl get pp` print the printer columns; every
//! example object (policies, pods, the extra node) passes the apiserver's validation as written.

use kube::Api;
use ocifit::api::{ImageSelectionPolicy, PlacementPolicy};
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
    assert_eq!(
        names,
        [
            "artifactcaches.ocifit.io",
            "imageselectionpolicies.ocifit.io",
            "placementpolicies.ocifit.io"
        ]
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

/// A PlacementPolicy named `name` with the given `spec` YAML (indented for `spec:`).
fn placement_policy(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: ocifit.io/v1alpha1\nkind: PlacementPolicy\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[tokio::test]
async fn the_example_placement_policy_and_deployment_are_stored_as_written() {
    let cluster = cluster_with_crds().await;
    let example = ocifit_testkit::repo_root().join("example/placement");

    let out = cluster
        .kubectl(["apply", "-f", example.to_str().unwrap()])
        .await
        .unwrap();

    assert!(out.contains("placementpolicy.ocifit.io/default"), "{out}");
    assert!(out.contains("deployment.apps/web"), "{out}");
    let stored = Api::<PlacementPolicy>::all(cluster.client().unwrap())
        .get("default")
        .await
        .unwrap();
    assert_eq!(stored.spec.architectures[0].name, "arm64");
    assert_eq!(
        stored
            .spec
            .on_inspection_failure
            .fallback_architecture
            .as_deref(),
        Some("amd64")
    );
}

#[tokio::test]
async fn a_placement_policy_is_stored_with_its_defaults_filled_in() {
    let cluster = cluster_with_crds().await;
    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &placement_policy("defaults", "  priority: 3\n"),
        )
        .await
        .unwrap();

    let stored = cluster
        .kubectl(["get", "pp", "defaults", "-o", "jsonpath={.spec}"])
        .await
        .unwrap();
    let spec: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(spec["priority"], 3);
    assert_eq!(
        spec["onInspectionFailure"]["action"],
        "ReleaseUnconstrained"
    );
    assert_eq!(spec["onInspectionFailure"]["attempts"], 5);
    assert_eq!(spec["onNoCommonPlatform"], "Hold");
    assert_eq!(spec["tagCache"]["ifNotPresent"], "24h");
}

#[tokio::test]
async fn a_fallback_without_an_architecture_is_rejected_by_the_cel_rule() {
    let cluster = cluster_with_crds().await;
    let spec = "  onInspectionFailure:\n    action: Fallback\n";

    let err = cluster
        .kubectl_with_input(["apply", "-f", "-"], &placement_policy("no-fallback", spec))
        .await
        .unwrap_err()
        .to_string();

    assert!(
        err.contains("fallbackArchitecture is set exactly when action is Fallback"),
        "{err}"
    );
}

#[tokio::test]
async fn a_placement_policy_name_longer_than_a_label_value_is_rejected() {
    let cluster = cluster_with_crds().await;
    let name = "p".repeat(64);

    let err = cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &placement_policy(&name, "  priority: 1\n"),
        )
        .await
        .unwrap_err()
        .to_string();

    assert!(err.contains("at most 63 characters"), "{err}");
}

#[tokio::test]
async fn a_bad_duration_and_an_out_of_range_weight_are_rejected_by_the_schema() {
    let cluster = cluster_with_crds().await;
    let spec =
        "  tagCache:\n    always: 5 minutes\n  architectures:\n  - name: arm64\n    weight: 101\n";

    let err = cluster
        .kubectl_with_input(["apply", "-f", "-"], &placement_policy("bad-values", spec))
        .await
        .unwrap_err()
        .to_string();

    assert!(err.contains("spec.tagCache.always"), "{err}");
    assert!(err.contains("spec.architectures[0].weight"), "{err}");
}

#[tokio::test]
async fn kubectl_get_pp_prints_the_printer_columns() {
    let cluster = cluster_with_crds().await;
    cluster
        .kubectl_with_input(
            ["apply", "-f", "-"],
            &placement_policy("pp-columns", "  priority: 7\n"),
        )
        .await
        .unwrap();

    let table = cluster.kubectl(["get", "pp", "pp-columns"]).await.unwrap();

    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "READY", "PRIORITY", "GATED", "HELD", "RELEASED", "AGE"
        ]
    );
    // Without a status yet, only the name, the priority and the age have values.
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..2], ["pp-columns", "7"], "{table}");
    assert_eq!(row.len(), 3, "{table}");
}

/// An ImageSelectionPolicy whose artifact is refreshed every `interval`.
fn refreshed_every(name: &str, interval: &str) -> String {
    policy(
        name,
        &format!(
            "  targetImage: placeholder:latest\n  artifact:\n    ref: 127.0.0.1:5000/compat:v1\n    refreshInterval: {interval}\n"
        ),
    )
}

#[tokio::test]
async fn durations_counting_days_are_accepted_and_the_refresh_minimum_counts_them() {
    let cluster = cluster_with_crds().await;
    let apply = |manifest: String| {
        let cluster = &cluster;
        async move {
            cluster
                .kubectl_with_input(["apply", "--dry-run=server", "-f", "-"], &manifest)
                .await
                .map_err(|err| err.to_string())
        }
    };

    for (name, interval) in [
        ("weekly", "7d"),
        ("day-and-a-half", "1d12h"),
        ("fraction-of-a-day", "0.5d"),
        ("ten-seconds-after-no-days", "0d10s"),
        ("no-days", "10s"),
    ] {
        apply(refreshed_every(name, interval))
            .await
            .unwrap_or_else(|err| panic!("refreshInterval {interval}: {err}"));
    }
    for (name, interval) in [
        ("five-seconds", "0d5s"),
        ("too-short", "5s"),
        ("tiny-day", "0.0001d"),
    ] {
        let err = apply(refreshed_every(name, interval)).await.unwrap_err();
        assert!(
            err.contains("refreshInterval must be at least 10s"),
            "refreshInterval {interval}: {err}"
        );
    }
    let err = apply(refreshed_every("days-last", "12h1d"))
        .await
        .unwrap_err();
    assert!(err.contains("spec.artifact.refreshInterval"), "{err}");

    let weekly_tags = "  tagCache:\n    ifNotPresent: 7d\n    always: 1d\n  onInspectionFailure:\n    timeout: 1d\n";
    apply(placement_policy("weekly-tags", weekly_tags))
        .await
        .unwrap();
    let err = apply(placement_policy(
        "worded",
        "  tagCache:\n    ifNotPresent: 1 day\n",
    ))
    .await
    .unwrap_err();
    assert!(err.contains("spec.tagCache.ifNotPresent"), "{err}");
}
