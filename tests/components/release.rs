//! The two ways ocifit's image is made agree: the `Dockerfile` the release workflow builds, and
//! the image `ocifit-dev image ocifit` assembles here without a container engine (built from this
//! test's own binary): the same user, entrypoint, command, exposed ports and static labels, exec-form
//! entrypoint and command (no shell at run time; neither image has one), the binary where the
//! entrypoint finds it. And the chart's default image is the one the release workflow publishes.

use std::collections::BTreeMap;
use std::path::Path;

use ocifit_testkit::image::ocifit_image;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The final stage of the Dockerfile: its instructions, continuation lines joined, comments gone.
fn final_stage() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(Path::new(REPO).join("Dockerfile")).expect("the Dockerfile");
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() && current.is_empty() {
            continue;
        }
        current.push_str(line.trim_end_matches('\\'));
        current.push(' ');
        if !line.ends_with('\\') {
            let (keyword, rest) = current.trim().split_once(' ').expect("an instruction");
            instructions.push((keyword.to_uppercase(), rest.trim().to_owned()));
            current.clear();
        }
    }
    let last_from = instructions
        .iter()
        .rposition(|(keyword, _)| keyword == "FROM")
        .expect("a FROM");
    instructions.split_off(last_from)
}

fn instruction<'a>(stage: &'a [(String, String)], keyword: &str) -> Vec<&'a str> {
    stage
        .iter()
        .filter(|(k, _)| k == keyword)
        .map(|(_, rest)| rest.as_str())
        .collect()
}

/// An exec-form instruction's JSON array (a shell-form one fails: it needs a shell).
fn exec_form(stage: &[(String, String)], keyword: &str) -> serde_json::Value {
    let [value] = instruction(stage, keyword)[..] else {
        panic!("one {keyword} in the final stage");
    };
    serde_json::from_str(value)
        .unwrap_or_else(|e| panic!("{keyword} {value} is not exec form (JSON): {e}"))
}

/// `LABEL k="v" k2="v2"` pairs.
fn labels(stage: &[(String, String)]) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for rest in instruction(stage, "LABEL") {
        let mut text = rest;
        while let Some((key, after)) = text.split_once("=\"") {
            let (value, tail) = after.split_once('"').expect("a closing quote");
            found.insert(key.trim().to_owned(), value.to_owned());
            text = tail;
        }
    }
    found
}

#[test]
fn the_image_assembled_here_agrees_with_the_dockerfile() {
    let stage = final_stage();
    let image = ocifit_image(
        Path::new(env!("CARGO_BIN_EXE_ocifit")),
        env!("CARGO_PKG_VERSION"),
        "test",
    )
    .expect("ocifit's image recipe");
    let dir = tempfile::tempdir().expect("a directory");
    let layout = image
        .write_layout(&dir.path().join("ocifit"), "ocifit:test")
        .expect("the image is assembled");
    let config = &layout.config["config"];

    assert_eq!(
        instruction(&stage, "USER"),
        [config["User"].as_str().expect("a user")]
    );
    assert_eq!(exec_form(&stage, "ENTRYPOINT"), config["Entrypoint"]);
    assert_eq!(exec_form(&stage, "CMD"), config["Cmd"]);
    let exposed: Vec<String> = instruction(&stage, "EXPOSE")
        .iter()
        .flat_map(|ports| ports.split_whitespace())
        .map(|port| format!("{port}/tcp"))
        .collect();
    let mut assembled: Vec<String> = config["ExposedPorts"]
        .as_object()
        .expect("exposed ports")
        .keys()
        .cloned()
        .collect();
    assembled.sort();
    assert_eq!(exposed, assembled);
    let dockerfile_labels = labels(&stage);
    assert_eq!(dockerfile_labels.len(), 4, "{dockerfile_labels:?}");
    for (key, value) in &dockerfile_labels {
        assert_eq!(config["Labels"][key], value.as_str(), "label {key}");
    }
    assert_eq!(
        config["Labels"]["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );

    // No shell at run time: nothing in the final stage runs one, and the image has none.
    assert_eq!(instruction(&stage, "RUN"), Vec::<&str>::new());
    assert_eq!(instruction(&stage, "SHELL"), Vec::<&str>::new());
    let paths = layout.paths().expect("the layer's paths");
    for shell in ["bin/sh", "bin/bash", "usr/bin/sh"] {
        assert!(!paths.contains(&shell.to_owned()), "{shell} in {paths:?}");
    }
    // The entrypoint's program is on the image's PATH, where the Dockerfile copies it.
    let copy = instruction(&stage, "COPY");
    assert!(
        copy.iter().any(|c| c.ends_with(" /usr/local/bin/ocifit")),
        "{copy:?}"
    );
    assert!(
        paths.contains(&"usr/local/bin/ocifit".to_owned()),
        "{paths:?}"
    );
    let env: Vec<&str> = config["Env"]
        .as_array()
        .expect("an environment")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        env.iter()
            .any(|e| e.starts_with("PATH=") && e.split(':').any(|d| d.ends_with("/usr/local/bin"))),
        "{env:?}"
    );
    // The loader the binary names, and the CA certificates registry TLS verifies against.
    assert!(paths.iter().any(|p| p.contains("ld-linux")), "{paths:?}");
    assert!(
        paths.contains(&"etc/ssl/certs/ca-certificates.crt".to_owned()),
        "{paths:?}"
    );
}

#[test]
fn the_charts_default_image_is_the_one_the_release_workflow_publishes() {
    let read = |path: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(Path::new(REPO).join(path)).expect(path);
        serde_saphyr::from_str(&text).expect(path)
    };
    let workflow = read(".github/workflows/release.yaml");
    let values = read("charts/ocifit/values.yaml");
    let chart = read("charts/ocifit/Chart.yaml");
    assert_eq!(values["image"]["repository"], workflow["env"]["IMAGE"]);
    // The default tag is the appVersion, which the workflow sets from the tag, as the crate's.
    assert_eq!(values["image"]["tag"], "");
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(chart["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_release_matrix_builds_each_platform_with_its_rust_target_and_actionlint_accepts_it() {
    let path = Path::new(REPO).join(".github/workflows/release.yaml");
    let text = std::fs::read_to_string(&path).expect("the release workflow");
    let workflow: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
    let build = &workflow["jobs"]["build"];
    let matrix: Vec<(&str, &str)> = build["strategy"]["matrix"]["include"]
        .as_array()
        .expect("a matrix of platforms")
        .iter()
        .map(|entry| {
            (
                entry["platform"].as_str().expect("a platform"),
                entry["target"].as_str().expect("a Rust target"),
            )
        })
        .collect();
    assert_eq!(
        matrix,
        [
            ("linux/amd64", "x86_64-unknown-linux-gnu"),
            ("linux/arm64", "aarch64-unknown-linux-gnu"),
            ("linux/arm/v7", "armv7-unknown-linux-gnueabihf"),
        ]
    );
    // Each matrix entry builds the image for its platform and the binary for its target.
    let steps = build["steps"].as_array().expect("steps");
    let image = steps
        .iter()
        .find(|step| {
            step["uses"]
                .as_str()
                .is_some_and(|uses| uses.starts_with("docker/build-push-action@"))
        })
        .expect("the image build");
    assert_eq!(image["with"]["platforms"], "${{ matrix.platform }}");
    assert!(
        steps
            .iter()
            .any(|step| step["env"]["TARGET"] == "${{ matrix.target }}"),
        "no step builds the binary for matrix.target"
    );
    // The index joins every platform's image, and the Dockerfile says what it is built for.
    assert_eq!(workflow["jobs"]["image"]["needs"][1], "build");
    let dockerfile =
        std::fs::read_to_string(Path::new(REPO).join("Dockerfile")).expect("Dockerfile");
    let header: String = dockerfile
        .lines()
        .take_while(|line| line.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    for (platform, _) in &matrix {
        assert!(
            header.contains(platform),
            "the Dockerfile's header omits {platform}"
        );
    }

    let actionlint = ocifit_testkit::Tools::locate()
        .and_then(|tools| tools.path(ocifit_testkit::Tool::Actionlint))
        .expect("actionlint (tools/install)");
    let output = std::process::Command::new(actionlint)
        .arg(&path)
        .output()
        .expect("actionlint runs");
    assert!(
        output.status.success(),
        "actionlint: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
