//! A workflow's results fetched from outside the cluster, as its users do at the end of it: on a
//! real node with the chart installed from ocifit's own image, a step pushes its output into a
//! deployed ArtifactCache (whose endpoint is a ClusterIP this machine's test process does not
//! use), and `ocifit artifact pull --cache oras -n workflow` fetches it by the cache's name through
//! the apiserver's port-forward to the registry's pod, with the cache's generated credentials;
//! `ocifit artifact push --cache` puts a file into the cache the same way, and it reads back.

use std::path::Path;

use serde_json::json;

use crate::artifact_cache::workflow::{
    ReadyCache, WORKFLOW, job, ready_cache, run_first_step, stage,
};

#[tokio::test]
async fn a_steps_output_is_pulled_by_the_caches_name_through_the_apiservers_port_forward() {
    let stage = stage().await;
    let ReadyCache { jobs, .. } = ready_cache(&stage, json!({"image": stage.cache_image})).await;
    let one = job(
        "step-one",
        &stage.step,
        &[
            ("output-uri", "workflow/step-one:v1"),
            ("output-path", "out"),
        ],
        "echo alpha > out/a.txt && mkdir out/nested && echo beta > out/nested/b.txt",
    );
    run_first_step(&stage.cluster, &jobs, &one).await;

    let pulled = stage.cluster.dir().join("pulled");
    let stdout = ocifit(
        stage.cluster.kubeconfig(),
        "pull",
        "workflow/step-one:v1",
        &pulled,
    )
    .await;
    assert!(stdout.contains("workflow/step-one:v1"), "{stdout}");
    assert_eq!(read(&pulled.join("out/a.txt")), "alpha\n");
    assert_eq!(read(&pulled.join("out/nested/b.txt")), "beta\n");

    // The other way: a file from here into the cache, read back by name.
    let file = stage.cluster.dir().join("notes.txt");
    std::fs::write(&file, "from outside\n").unwrap();
    ocifit(
        stage.cluster.kubeconfig(),
        "push",
        "workflow/from-outside:v1",
        &file,
    )
    .await;
    let back = stage.cluster.dir().join("back");
    ocifit(
        stage.cluster.kubeconfig(),
        "pull",
        "workflow/from-outside:v1",
        &back,
    )
    .await;
    assert_eq!(read(&back.join("notes.txt")), "from outside\n");
}

/// Runs `ocifit artifact pull|push --cache oras -n WORKFLOW REFERENCE PATH` (a pull with `-o`)
/// with the cluster's kubeconfig and no registry credentials in its environment (they come from
/// the cache); its standard output.
async fn ocifit(kubeconfig: &Path, verb: &str, reference: &str, path: &Path) -> String {
    let mut args = vec![verb, "--cache", "oras", "-n", WORKFLOW, reference];
    if verb == "pull" {
        args.push("-o");
    }
    let output = tokio::process::Command::new(crate::support::ocifit_binary())
        .arg("artifact")
        .args(&args)
        .arg(path)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("ORAS_USER")
        .env_remove("ORAS_PULL_PASS")
        .env_remove("ORAS_PUSH_PASS")
        .output()
        .await
        .expect("ocifit runs");
    crate::support::succeeded(&format!("ocifit artifact {args:?}"), &output)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
