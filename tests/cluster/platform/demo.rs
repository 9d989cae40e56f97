//! The README's demo, run as CI runs it: `tools/demo --check` (debug build, its own state
//! directory) starts everything and installs ocifit with `helm install` of its chart (the release is
//! deployed), and every flavor pod must be bound to a node of its flavor with
//! that flavor's image from the artifact, the one on the real node running it (its log shows the
//! image's line), both replicas of the placement example must be on arm64 nodes constrained to
//! linux/arm64, and the artifact cache's two-step workflow must complete on the real node with
//! its result pulled from the cache with the ORAS SDK; then it tears everything down.

use std::process::Command;

#[test]
fn demo_binds_each_flavor_pod_to_its_flavor_with_the_matching_image() {
    let state = tempfile::tempdir().expect("a state directory");
    let output = Command::new(ocifit_testkit::repo_root().join("tools/demo"))
        .arg("--check")
        .env("OCIFIT_DEMO_DIR", state.path())
        .output()
        .expect("tools/demo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tools/demo --check failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
    );
    // ocifit is installed the way users install it: by its chart, deployed.
    assert!(
        stdout.contains("[demo] helm install ocifit charts/ocifit --namespace ocifit-system"),
        "{stdout}"
    );
    let release = stdout
        .lines()
        .skip_while(|line| *line != "$ helm list -n ocifit-system")
        .nth(2)
        .unwrap_or_else(|| panic!("no helm list in:\n{stdout}"));
    let cells: Vec<&str> = release.split_whitespace().collect();
    assert_eq!(cells[0], "ocifit", "{release}");
    assert!(cells.contains(&"deployed"), "{release}");
    assert!(
        cells.iter().any(|cell| cell
            .strip_prefix("ocifit-")
            .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()))),
        "the chart's name and version: {release}"
    );
    for (pod, node, flavor, image) in [
        ("vanilla", "worker-vanilla", "vanilla", "/library/debian:11"),
        (
            "chocolate",
            "worker-chocolate",
            "chocolate",
            "/library/ubuntu:24.04",
        ),
        (
            "strawberry",
            "worker-strawberry",
            "strawberry",
            "/library/rockylinux:9",
        ),
        ("runs", "worker-real", "vanilla", "/library/debian:11"),
    ] {
        let row = stdout
            .lines()
            .find(|line| line.starts_with(&format!("{pod} ")))
            .unwrap_or_else(|| panic!("no row for pod {pod} in:\n{stdout}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], node, "{row}");
        assert_eq!(cells[2], flavor, "{row}");
        assert!(cells[3].ends_with(image), "{row}");
        assert_eq!(cells[4], "yes", "{row}");
    }
    assert!(
        stdout.contains("$ kubectl logs runs\nflavor vanilla\n"),
        "the real node's pod logs its image's line:\n{stdout}"
    );
    assert!(
        stdout.contains("flavors"),
        "kubectl get isp printed:\n{stdout}"
    );
    // The placement example: both replicas of a Deployment whose sidecar is arm64-only are on
    // arm64 nodes, constrained to linux/arm64 by ocifit.
    let replicas: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|line| line.starts_with("web-"))
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(replicas.len(), 2, "both replicas reported:\n{stdout}");
    for cells in &replicas {
        assert_eq!(cells[2..], ["arm64", "linux/arm64", "yes"], "{cells:?}");
    }
    assert!(
        stdout.contains("$ kubectl get pp\n"),
        "kubectl get pp printed:\n{stdout}"
    );
    // The artifact cache's two-step workflow on the real node, its result pulled with ORAS.
    let steps: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("Job step-"))
        .collect();
    assert_eq!(steps.len(), 2, "both steps complete:\n{stdout}");
    assert!(
        stdout.contains("/workflow/step-two:v1 && cat sum.txt\n55\n"),
        "the workflow's result, pulled with the ORAS SDK:\n{stdout}"
    );
    eprintln!("{}", steps.join("\n"));
}
