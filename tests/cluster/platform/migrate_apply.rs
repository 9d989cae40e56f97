//! `ocifit migrate` on each seed's files in the shapes the seeds document
//! (`tests/fixtures/migrate/`), its output checked as a user would apply it: the objects pass
//! `kubeconform -strict` against schemas from this apiserver and from `crds/` (no network), a
//! server-side dry run on the apiserver accepts every one as written, and the chart values render
//! with `helm template` (the chart's values schema refuses unknown or ill-typed values). An input
//! that becomes no object (ocifit-k8s's install, replaced by the chart) gets a note per document.

use ocifit_testkit::chart::{NAMESPACE, RELEASE, chart_dir, documents, helm};
use ocifit_testkit::{
    Cluster, KubeconformSchemas, SharedCluster, apply_crd_dir, create_namespace, repo_root,
};

static CLUSTER: SharedCluster = SharedCluster::new(Cluster::builder);

/// Each seed's input files, and the kinds its migrated objects have, in order.
const SAMPLES: &[(&[&str], &[&str])] = &[
    (
        &["oras-cache.yaml"],
        &["ArtifactCache", "Secret", "ArtifactCache", "Secret"],
    ),
    (&["kube-arch-webhook-values.yaml"], &["PlacementPolicy"]),
    (
        &["kube-arch-webhook-first-spelling.yaml"],
        &["PlacementPolicy"],
    ),
    (&["archaware-controller.yaml"], &["PlacementPolicy"]),
    (
        &["archaware-controller.yaml", "archaware-cluster.yaml"],
        &["PlacementPolicy"],
    ),
    (&["ocifit-k8s-webhook.yaml"], &[]),
];

#[tokio::test]
async fn every_seeds_migrated_objects_pass_kubeconform_and_a_server_side_dry_run() {
    let cluster = CLUSTER.get().await.unwrap();
    let client = cluster.client().unwrap();
    let tools = cluster.tools().clone();
    let schemas = KubeconformSchemas::create(cluster.dir().join("migrate-schemas")).unwrap();
    // The built-in kinds' schemas, read before ocifit's CRDs exist: their group's OpenAPI document
    // is listed at once but served empty until the apiserver has built it (ocifit's come from the
    // CRD files below).
    schemas.add_from_apiserver(&client).await.unwrap();
    apply_crd_dir(&client, &repo_root().join("crds"))
        .await
        .unwrap();
    for namespace in ["workflow", "remote"] {
        create_namespace(&client, namespace).await.unwrap();
    }
    for crd in ["placementpolicies.ocifit.io", "artifactcaches.ocifit.io"] {
        let file = repo_root().join(format!("crds/{crd}.yaml"));
        assert!(schemas.add_crd_file(&file).unwrap() > 0, "{crd}");
    }

    for (files, kinds) in SAMPLES {
        let sample = files.join(" ");
        let inputs = files
            .iter()
            .map(|file| repo_root().join("tests/fixtures/migrate").join(file));
        let values = cluster.dir().join(format!("values-{}", files.join("+")));
        let output = tokio::process::Command::new(crate::support::ocifit_binary())
            .arg("migrate")
            .args(inputs)
            .arg("--values")
            .arg(&values)
            .output()
            .await
            .unwrap();
        let objects = crate::support::succeeded(&format!("ocifit migrate {sample}"), &output);
        let migrated: Vec<String> = documents(&objects)
            .unwrap()
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(&migrated, kinds, "{sample}: {objects}");
        if kinds.is_empty() {
            // Nothing to apply: every document of the install is named with what replaces it.
            assert_eq!(
                objects.matches("part of ocifit-k8s's install").count(),
                8,
                "{sample}: {objects}"
            );
            continue;
        }

        let report = schemas
            .validate(&tools, &objects)
            .await
            .unwrap_or_else(|e| panic!("{sample}: {e}\n{objects}"));
        let expected = format!("Valid: {}, Invalid: 0, Errors: 0, Skipped: 0", kinds.len());
        assert!(report.contains(&expected), "{sample}: {report}");

        let applied = cluster
            .kubectl_with_input(["apply", "--dry-run=server", "-f", "-"], &objects)
            .await
            .unwrap_or_else(|e| panic!("{sample}: {e}\n{objects}"));
        assert_eq!(
            applied.matches("(server dry run)").count(),
            kinds.len(),
            "{sample}: {applied}"
        );

        if values.exists() {
            let chart = chart_dir();
            helm(
                &[
                    "template",
                    RELEASE,
                    chart.to_str().unwrap(),
                    "--namespace",
                    NAMESPACE,
                    "-f",
                    values.to_str().unwrap(),
                ],
                None,
            )
            .await
            .unwrap_or_else(|e| panic!("{sample}: the chart refuses the values: {e}"));
        }
    }
}
