//! `ocifit resolve` as users run it: the binary, real files, its output contract and exit status.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use ocifit_testkit::Candidates;
use serde_json::Value;

fn resolve(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ocifit"))
        .arg("resolve")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the ocifit binary runs")
}

/// `ocifit resolve --offline`: artifacts from files, no registry asked (the example images are
/// on Docker Hub, out of reach here).
fn offline(args: &[&str]) -> Output {
    let mut all = vec!["--offline"];
    all.extend(args);
    resolve(&all)
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// node name → image, from the JSON output.
fn images_by_node(report: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let classes = report["classes"].as_array().expect("classes is a list");
    for class in classes {
        for node in class["nodes"].as_array().expect("nodes is a list") {
            let node = node.as_str().expect("a node name is a string");
            out.insert(node.to_owned(), class["image"].clone());
        }
    }
    out
}

const FLAVOR_ARTIFACT: &str = "example/flavor-compat.json";
const FLAVOR_NODES: &str = "example/flavor-nodes.json";

/// `ocifit resolve --offline` on the flavor example's artifact and nodes, then `extra`.
fn flavor_example(extra: &[&str]) -> Output {
    let mut args = vec!["--artifact", FLAVOR_ARTIFACT, "--nodes", FLAVOR_NODES];
    args.extend(extra);
    offline(&args)
}

/// The standard error of a run refused for bad input (exit status 2).
fn exit_2_stderr(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8(out.stderr.clone()).expect("UTF-8 on stderr")
}

/// The standard error of a run the registry could not answer (exit status 4, docs/cli.md).
fn exit_4_stderr(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(i32::from(ocifit::cli::Exit::Registry.code())),
        "{out:?}"
    );
    String::from_utf8(out.stderr.clone()).expect("UTF-8 on stderr")
}

/// The lines of the registry's request log.
fn requests(registry: &ocifit_testkit::Registry) -> Vec<String> {
    let log =
        std::fs::read_to_string(registry.dir().join("registry.log")).expect("the registry log");
    log.lines().map(str::to_owned).collect()
}

fn write(dir: &Path, name: &str, contents: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("the test file is written");
    path.display().to_string()
}

#[test]
fn flavor_example_maps_each_flavor_to_its_image_in_json() {
    let out = flavor_example(&["-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = json(&out);
    assert_eq!(report["format"], "ocifit");
    let images = images_by_node(&report);
    let flavors: BTreeMap<String, String> = {
        let nodes: Value =
            serde_json::from_str(include_str!("../../example/flavor-nodes.json")).unwrap();
        nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| {
                let flavor = n["metadata"]["labels"]["feature.node.ocifit-k8s.flavor"].as_str()?;
                Some((
                    n["metadata"]["name"].as_str()?.to_owned(),
                    flavor.to_owned(),
                ))
            })
            .collect()
    };
    assert_eq!(flavors.len(), 3, "the example has three flavoured workers");
    for (node, flavor) in flavors {
        let expected = match flavor.as_str() {
            "vanilla" => "debian:11",
            "chocolate" => "ubuntu:24.04",
            "strawberry" => "rockylinux:9",
            other => panic!("unexpected flavor {other}"),
        };
        assert_eq!(images[&node], expected, "node {node} ({flavor})");
    }
    assert!(
        !images.contains_key("control-plane"),
        "control-plane nodes are left out by default: {images:?}"
    );
    let class = &report["classes"][0];
    for field in ["name", "nodes", "labels", "image", "match", "explanation"] {
        assert!(class.get(field).is_some(), "class lacks {field}: {class}");
    }
    assert!(class["name"].as_str().unwrap().starts_with("c-"));
}

#[test]
fn flavor_example_table_names_each_image() {
    let out = flavor_example(&[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("format ocifit, detected:"), "{table}");
    assert!(table.contains("CLASS"), "{table}");
    for image in ["debian:11", "ubuntu:24.04", "rockylinux:9"] {
        assert!(table.contains(image), "{image} missing from:\n{table}");
    }
}

#[test]
fn nfd_example_reads_merged_node_features_and_label_projection() {
    let out = offline(&[
        "--artifact",
        "example/nfd-compat.yaml",
        "--nodes",
        "example/nfd-nodes.json",
        "--node-features",
        "example/nfd-nodefeatures.json",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = json(&out);
    assert_eq!(report["format"], "nfd");
    let images = images_by_node(&report);
    assert_eq!(images["gpu-1"], "registry.example.com/acme/app:v1-cuda");
    assert_eq!(images["avx2-1"], "registry.example.com/acme/app:v1-avx2");
    assert_eq!(images["old-1"], "registry.example.com/acme/app:v1-generic");
}

#[test]
fn without_node_features_the_gpu_node_loses_its_gpu() {
    let out = offline(&[
        "--artifact",
        "example/nfd-compat.yaml",
        "--nodes",
        "example/nfd-nodes.json",
        "-o",
        "json",
    ]);
    let report = json(&out);
    let images = images_by_node(&report);
    assert_ne!(images["gpu-1"], "registry.example.com/acme/app:v1-cuda");
}

#[test]
fn a_node_no_set_fits_exits_1_and_still_prints_why() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = write(
        dir.path(),
        "nodes.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: mint-1\n  labels:\n    feature.node.ocifit-k8s.flavor: mint\n    kubernetes.io/arch: amd64\n    kubernetes.io/os: linux\n",
    );
    let out = offline(&[
        "--artifact",
        FLAVOR_ARTIFACT,
        "--nodes",
        &nodes,
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report = json(&out);
    let class = &report["classes"][0];
    assert_eq!(class["image"], Value::Null);
    assert_eq!(class["match"], Value::Null);
    let reason = class["explanation"]["sets"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("mint"), "{reason}");
}

#[test]
fn an_invalid_operator_exits_2_naming_file_set_and_expression() {
    let dir = tempfile::tempdir().unwrap();
    let artifact = write(
        dir.path(),
        "bad.json",
        r#"{"version":"v1alpha1","compatibilities":[{"tag":"debian:11","rules":[{"matchFeatures":[{"matchExpressions":[{"key":"k","op":"Matches","value":["x"]}]}]}]}]}"#,
    );
    let out = offline(&["--artifact", &artifact, "--nodes", FLAVOR_NODES]);
    let stderr = exit_2_stderr(&out);
    assert!(stderr.contains(&artifact), "{stderr}");
    assert!(stderr.contains("set 0"), "{stderr}");
    assert!(stderr.contains("debian:11"), "{stderr}");
    assert!(stderr.contains("Matches"), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "nothing is printed on stdout for invalid input"
    );
}

#[test]
fn an_ocifit_artifact_forced_as_nfd_is_rejected_not_silently_unmatched() {
    let out = flavor_example(&["--format", "nfd"]);
    let stderr = exit_2_stderr(&out);
    assert!(stderr.contains("matchExpressions"), "{stderr}");
}

#[test]
fn a_nodes_file_of_another_kind_exits_2_naming_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let pods = write(dir.path(), "pods.json", r#"{"kind":"PodList","items":[]}"#);
    let out = offline(&["--artifact", FLAVOR_ARTIFACT, "--nodes", &pods]);
    let stderr = exit_2_stderr(&out);
    assert!(stderr.contains("PodList"), "{stderr}");
}

#[test]
fn a_node_selector_can_include_the_control_plane() {
    let out = flavor_example(&[
        "--node-selector",
        "node-role.kubernetes.io/control-plane=",
        "-o",
        "json",
    ]);
    let report = json(&out);
    let images = images_by_node(&report);
    assert_eq!(
        images.keys().collect::<Vec<_>>(),
        ["control-plane"],
        "{report}"
    );
}

/// The artifact pushed to a real registry with the ORAS SDK, as `oras push` does.
async fn registry_with_flavors() -> (ocifit_testkit::Registry, String, String) {
    let registry = ocifit_testkit::Registry::builder()
        .start()
        .await
        .expect("the test registry starts");
    let reference = registry.reference("ocifit/flavor-compat:v1");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(FLAVOR_ARTIFACT);
    let digest = registry
        .push_artifact(&ocifit_testkit::OrasArtifact::new(
            &reference,
            &file,
            ocifit::engine::OCIFIT_LAYER_MEDIA_TYPE,
        ))
        .await
        .expect("the ORAS SDK pushes the artifact");
    (registry, reference, digest)
}

#[tokio::test]
async fn an_oras_pushed_artifact_resolves_by_tag_and_digest_like_the_file() {
    let (registry, reference, digest) = registry_with_flavors().await;
    let from_file = json(&flavor_example(&["-o", "json"]));
    let repository = registry.reference("ocifit/flavor-compat");
    for artifact in [reference.clone(), format!("{repository}@{digest}")] {
        let out = resolve(&[
            "--artifact",
            &artifact,
            "--plain-http",
            "--nodes",
            FLAVOR_NODES,
            "-o",
            "json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{artifact}: {out:?}");
        let from_registry = json(&out);
        assert_eq!(from_registry["digest"], digest.as_str(), "{artifact}");
        assert_eq!(from_registry["format"], "ocifit");
        assert_eq!(
            from_registry["classes"], from_file["classes"],
            "{artifact} answers as the file does"
        );
    }
}

#[tokio::test]
async fn a_registry_reference_without_plain_http_is_never_sent_in_clear() {
    let (registry, reference, _) = registry_with_flavors().await;
    let requests_before = requests(&registry).len();
    let out = resolve(&["--artifact", &reference, "--nodes", FLAVOR_NODES]);
    let stderr = exit_4_stderr(&out);
    assert!(stderr.contains("ocifit/flavor-compat"), "{stderr}");
    let new_requests = &requests(&registry)[requests_before..];
    assert!(
        !new_requests
            .iter()
            .any(|l| l.contains("\"GET /v2/") || l.contains("\"HEAD /v2/")),
        "a plain-HTTP request reached the registry: {new_requests:?}"
    );
}

#[test]
fn a_missing_artifact_file_says_so_instead_of_asking_a_registry() {
    let out = offline(&[
        "--artifact",
        "example/no-such-compat.json",
        "--nodes",
        FLAVOR_NODES,
    ]);
    let stderr = exit_2_stderr(&out);
    assert!(
        stderr.contains("failed to read example/no-such-compat.json"),
        "{stderr}"
    );
}

#[test]
fn offline_says_the_platforms_were_not_checked() {
    let out = flavor_example(&[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .contains("platforms of debian:11 not checked (--offline): taken to run on every node"),
        "{table}"
    );
    let report = json(&flavor_example(&["-o", "json"]));
    for platform in report["platforms"].as_array().expect("platforms is a list") {
        assert_eq!(platform["check"], "notChecked", "{platform}");
    }
    let refused = offline(&[
        "--artifact",
        "127.0.0.1:1/acme/compat:v1",
        "--nodes",
        FLAVOR_NODES,
    ]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--offline asks no registry"),
        "{refused:?}"
    );
}

/// A policy with candidates, read as the controller reads it: each candidate's NFD artifact from
/// the registry (attached with regctl), the images' platforms checked there, a candidate without
/// an artifact left out with the reason, and the policy's nodeSelector applied.
#[tokio::test]
async fn a_candidates_policy_resolves_as_the_controller_does_with_platforms_checked() {
    let registry = ocifit_testkit::Registry::builder()
        .start()
        .await
        .expect("the test registry starts");
    let Candidates {
        fast,
        portable,
        bare,
    } = registry
        .push_candidates(&["linux/amd64", "linux/arm64"])
        .await
        .expect("the candidates pushed");
    let policy = serde_json::json!({
        "apiVersion": "ocifit.io/v1alpha1", "kind": "ImageSelectionPolicy",
        "metadata": {"name": "app"},
        "spec": {"artifact": {"candidates": [
                    {"image": bare.reference, "weight": 30},
                    {"image": fast.reference, "weight": 20},
                    {"image": portable.reference}]},
                 "targetImage": "placeholder:latest",
                 "nodeSelector": {"pool": "app"}}
    });
    let node = |name: &str, arch: &str, avx: bool, pool: &str| {
        let mut labels = serde_json::json!({"kubernetes.io/os": "linux",
                                            "kubernetes.io/arch": arch, "pool": pool});
        if avx {
            labels["feature.node.kubernetes.io/cpu-cpuid.AVX512F"] = "true".into();
        }
        serde_json::json!({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": labels}})
    };
    let nodes = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        node("avx", "amd64", true, "app"),
        node("plain", "amd64", false, "app"),
        node("arm-avx", "arm64", true, "app"),
        node("elsewhere", "amd64", true, "other"),
    ]});
    let policy_file = write(registry.dir(), "policy.json", &policy.to_string());
    let nodes_file = write(registry.dir(), "nodes.json", &nodes.to_string());
    let out = resolve(&[
        "--policy",
        &policy_file,
        "--nodes",
        &nodes_file,
        "--plain-http",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = json(&out);
    assert_eq!(report["policy"], "app");
    assert_eq!(report["format"], "nfd");
    let images = images_by_node(&report);
    assert_eq!(images["avx"], fast.reference.as_str());
    assert_eq!(images["plain"], portable.reference.as_str());
    // fast's rule holds on the arm node, but fast is built for linux/amd64 only.
    assert_eq!(images["arm-avx"], portable.reference.as_str());
    assert!(
        !images.contains_key("elsewhere"),
        "outside the nodeSelector"
    );
    for platform in report["platforms"].as_array().expect("platforms") {
        assert_eq!(platform["check"], "checked", "{platform}");
    }
    let arm = report["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .find(|c| c["nodes"][0] == "arm-avx")
        .expect("the arm class");
    let reason = arm["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("{} is not built for linux/arm64", fast.reference))
            && reason.contains(&format!("skipped candidate 0 ({:?})", bare.reference)),
        "{reason}"
    );
}

/// An image whose index spells its one platform `linux/aarch64` (as `uname -m` does) is chosen
/// for arm64 nodes and refused for amd64 ones, as placement reads it.
#[tokio::test]
async fn an_image_built_for_linux_aarch64_is_resolved_for_arm64_nodes() {
    let registry = ocifit_testkit::Registry::builder()
        .start()
        .await
        .expect("the test registry starts");
    let arm = registry
        .push_index_with_attestation("acme/app", "arm", &["linux/aarch64"])
        .await
        .expect("regctl index put");
    let dir = registry.dir();
    let artifact = serde_json::json!({"version": "v1alpha1",
        "compatibilities": [{"tag": arm.reference, "rules": []}]});
    let node = |name: &str, arch: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
            "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": arch}}})
    };
    let nodes = serde_json::json!({"apiVersion": "v1", "kind": "List",
        "items": [node("arm-1", "arm64"), node("amd-1", "amd64")]});
    let artifact_file = write(dir, "aarch64.json", &artifact.to_string());
    let nodes_file = write(dir, "arm-nodes.json", &nodes.to_string());
    // Pushed beside the image, so `--plain-http` reaches both.
    let artifact_ref = registry.reference("acme/app-compat:v1");
    registry
        .push_artifact(&ocifit_testkit::OrasArtifact::new(
            &artifact_ref,
            Path::new(&artifact_file),
            ocifit::engine::OCIFIT_LAYER_MEDIA_TYPE,
        ))
        .await
        .expect("the ORAS SDK pushes the artifact");
    let out = resolve(&[
        "--artifact",
        &artifact_ref,
        "--nodes",
        &nodes_file,
        "--plain-http",
        "-o",
        "json",
    ]);
    let report = json(&out);
    let platforms = &report["platforms"][0];
    assert_eq!(platforms["check"], "checked", "{report}");
    assert_eq!(platforms["note"], "linux/aarch64", "{report}");
    let images = images_by_node(&report);
    assert_eq!(images["arm-1"], arm.reference.as_str(), "{report}");
    assert_eq!(images["amd-1"], Value::Null, "{report}");
}

#[tokio::test]
async fn a_registry_off_the_allowed_list_is_refused_naming_it_and_never_asked() {
    let (registry, reference, _) = registry_with_flavors().await;
    let requests_before = requests(&registry).len();
    let out = resolve(&[
        "--artifact",
        &reference,
        "--nodes",
        FLAVOR_NODES,
        "--plain-http",
        "--allowed-registries",
        "registry.example.com,*.example.org",
    ]);
    let stderr = exit_4_stderr(&out);
    let host = reference.split('/').next().unwrap();
    assert!(
        stderr.contains(&format!("refused to reach {host}"))
            && stderr.contains("not in the allowed registries"),
        "{stderr}"
    );
    assert_eq!(
        requests(&registry).len(),
        requests_before,
        "nothing reached the registry"
    );
}
