//! The release's supply chain, read from `.github/workflows/release.yaml` (it cannot run here):
//! every action pinned by commit; an OIDC token only for the jobs that sign and each of them
//! granted one; the image index and every platform's image signed, the chart signed, every binary
//! and SBOM signed; SLSA provenance for the image, the chart and the binaries; an SBOM of every
//! binary (built with cargo-auditable, the Dockerfile's too) and of every platform's image; and
//! docs/install.md's verification commands naming the identity this workflow signs with.

use std::path::Path;

use serde_json::Value;

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const WORKFLOW: &str = ".github/workflows/release.yaml";
const ISSUER: &str = "https://token.actions.githubusercontent.com";
const COSIGN_INSTALLER: &str = "sigstore/cosign-installer";
const PROVENANCE: &str = "actions/attest-build-provenance";

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(REPO).join(path)).expect(path)
}

fn workflow() -> Value {
    serde_saphyr::from_str(&read(WORKFLOW)).expect("the release workflow is YAML")
}

fn steps(job: &Value) -> &[Value] {
    job["steps"].as_array().map_or(&[], Vec::as_slice)
}

fn uses(step: &Value, action: &str) -> bool {
    step["uses"]
        .as_str()
        .and_then(|uses| uses.split_once('@'))
        .is_some_and(|(name, _)| name == action)
}

/// Every `run` script of a job, one after the other.
fn script(job: &Value) -> String {
    steps(job)
        .iter()
        .filter_map(|step| step["run"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The jobs that need `needed` (directly).
fn jobs_needing<'a>(workflow: &'a Value, needed: &str) -> Vec<(&'a String, &'a Value)> {
    workflow["jobs"]
        .as_object()
        .expect("jobs")
        .iter()
        .filter(|(_, job)| {
            job["needs"]
                .as_array()
                .is_some_and(|needs| needs.iter().any(|n| n == needed))
        })
        .collect()
}

/// The one job that needs `needed` and has a step using `action`.
fn attesting_job<'a>(workflow: &'a Value, needed: &str) -> &'a Value {
    let found: Vec<_> = jobs_needing(workflow, needed)
        .into_iter()
        .filter(|(_, job)| steps(job).iter().any(|s| uses(s, PROVENANCE)))
        .collect();
    let [(_, job)] = found[..] else {
        panic!("one job after `{needed}` attests its provenance, found {found:?}");
    };
    job
}

fn provenance_step(job: &Value) -> &Value {
    steps(job)
        .iter()
        .find(|s| uses(s, PROVENANCE))
        .expect("a provenance step")
}

#[test]
fn every_action_is_pinned_to_a_commit_with_its_version_named() {
    let text = read(WORKFLOW);
    let pinned =
        regex::Regex::new(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$").expect("a pattern");
    let mut count = 0;
    for line in text.lines() {
        let Some((_, action)) = line.split_once("uses: ") else {
            continue;
        };
        count += 1;
        assert!(
            pinned.is_match(action.trim()),
            "not pinned by commit (owner/name@<40 hex> # vX.Y.Z): {action}"
        );
    }
    assert!(count > 10, "only {count} actions found");
}

#[test]
fn only_the_jobs_that_sign_may_ask_for_an_oidc_token_and_each_of_them_does() {
    let workflow = workflow();
    assert_eq!(
        workflow["permissions"],
        serde_json::json!({"contents": "read"}),
        "the workflow's default permissions"
    );
    let mut signing = Vec::new();
    for (name, job) in workflow["jobs"].as_object().expect("jobs") {
        let signs = steps(job)
            .iter()
            .any(|s| uses(s, COSIGN_INSTALLER) || uses(s, PROVENANCE));
        let token = &job["permissions"]["id-token"];
        if signs {
            signing.push(name.as_str());
            assert_eq!(token, "write", "job {name} signs without an OIDC token");
        } else {
            assert!(
                token.is_null(),
                "job {name} signs nothing but may ask for a token"
            );
        }
        if steps(job).iter().any(|s| uses(s, PROVENANCE)) {
            assert_eq!(job["permissions"]["attestations"], "write", "job {name}");
        }
    }
    assert_eq!(
        signing,
        [
            "binary-attestations",
            "chart-attestations",
            "image-attestations"
        ]
    );
}

#[test]
fn the_image_index_and_every_platforms_image_are_signed_attested_and_described() {
    let workflow = workflow();
    let job = attesting_job(&workflow, "image");
    let script = script(job);
    // The index's digest from the tag the image job pushed, each platform's image from the index.
    assert!(
        script.contains("imagetools inspect \"$IMAGE:$VERSION\""),
        "{script}"
    );
    assert!(
        script.contains("cosign sign --yes --recursive \"$IMAGE@$DIGEST\""),
        "{script}"
    );
    assert!(script.contains("while read -r platform digest"), "{script}");
    assert!(
        script.contains("scan \"registry:$IMAGE@$digest\" --output \"spdx-json=$sbom\""),
        "an SBOM of each platform's image: {script}"
    );
    assert!(
        script.contains(
            "cosign attest --yes --type spdxjson --predicate \"$sbom\" \"$IMAGE@$digest\""
        ),
        "the SBOM attached to its image: {script}"
    );
    let provenance = &provenance_step(job)["with"];
    assert_eq!(provenance["subject-name"], "${{ env.IMAGE }}");
    assert_eq!(
        provenance["subject-digest"],
        "${{ steps.index.outputs.digest }}"
    );
    assert_eq!(provenance["push-to-registry"], true);
    assert_eq!(job["permissions"]["packages"], "write");
}

#[test]
fn the_chart_is_signed_and_attested_by_the_digest_helm_pushed() {
    let workflow = workflow();
    let chart = &workflow["jobs"]["chart"];
    assert_eq!(
        chart["outputs"]["digest"],
        "${{ steps.push.outputs.digest }}"
    );
    let push = steps(chart)
        .iter()
        .find(|s| s["id"] == "push")
        .expect("the push step");
    let push_script = push["run"].as_str().expect("a script");
    assert!(
        push_script.contains("echo \"digest=$digest\" >> \"$GITHUB_OUTPUT\""),
        "{push_script}"
    );
    let job = attesting_job(&workflow, "chart");
    let sign = steps(job)
        .iter()
        .find(|s| s["id"] == "chart")
        .expect("the signing step");
    assert_eq!(sign["env"]["DIGEST"], "${{ needs.chart.outputs.digest }}");
    assert!(
        sign["run"]
            .as_str()
            .is_some_and(|run| run.contains("cosign sign --yes \"$name@$DIGEST\"")),
        "{sign}"
    );
    let provenance = &provenance_step(job)["with"];
    assert_eq!(
        provenance["subject-name"],
        "${{ steps.chart.outputs.name }}"
    );
    assert_eq!(
        provenance["subject-digest"],
        "${{ needs.chart.outputs.digest }}"
    );
    assert_eq!(provenance["push-to-registry"], true);
    assert_eq!(job["permissions"]["packages"], "write");
}

#[test]
fn every_binary_has_an_sbom_a_signature_and_provenance_on_the_release() {
    let workflow = workflow();
    let build = &workflow["jobs"]["build"];
    let build_script = script(build);
    assert!(
        build_script
            .contains("auditable build --release --locked --bin ocifit --target \"$TARGET\""),
        "the binary is built with cargo-auditable: {build_script}"
    );
    assert!(
        build_script
            .contains("cp \"target/$TARGET/release/ocifit\" \"dist/ocifit-$VERSION-$TARGET\""),
        "{build_script}"
    );
    let sbom = steps(build)
        .iter()
        .find(|s| uses(s, "anchore/sbom-action"))
        .expect("an SBOM step in the build");
    assert_eq!(
        sbom["with"]["file"],
        "dist/ocifit-${{ needs.version.outputs.version }}-${{ matrix.target }}",
        "the SBOM describes the binary just built"
    );
    assert_eq!(sbom["with"]["format"], "spdx-json");
    let uploaded = steps(build).iter().any(|s| {
        uses(s, "actions/upload-artifact")
            && s["with"]["name"] == "sbom-binary-${{ matrix.target }}"
            && s["with"]["path"] == "sbom/"
    });
    assert!(uploaded, "the binary's SBOM is kept for the release");

    let job = attesting_job(&workflow, "binaries");
    assert_eq!(
        provenance_step(job)["with"]["subject-path"],
        "dist/ocifit-*"
    );
    let script = script(job);
    assert!(script.contains("for file in dist/* sbom/*; do"), "{script}");
    assert!(
        script.contains("cosign sign-blob --yes --bundle \"$file.sigstore.json\" \"$file\""),
        "{script}"
    );
    assert!(
        script.contains("gh release upload \"$TAG\" dist/*.sigstore.json sbom/*"),
        "{script}"
    );
    assert_eq!(job["permissions"]["contents"], "write");
    // The image's SBOMs reach the release through the same upload.
    assert!(
        job["needs"]
            .as_array()
            .is_some_and(|needs| needs.iter().any(|n| n == "image-attestations"))
    );
    let downloads_sboms = steps(job)
        .iter()
        .any(|s| uses(s, "actions/download-artifact") && s["with"]["pattern"] == "sbom-*");
    assert!(downloads_sboms, "the SBOMs are downloaded to be signed");
}

#[test]
fn the_images_binary_is_built_with_the_workflows_cargo_auditable() {
    let workflow = workflow();
    let version = workflow["env"]["CARGO_AUDITABLE_VERSION"]
        .as_str()
        .expect("the workflow's cargo-auditable version");
    let dockerfile = read("Dockerfile");
    assert!(
        dockerfile.contains(&format!("ARG CARGO_AUDITABLE_VERSION={version}\n")),
        "the Dockerfile's default cargo-auditable is {version}"
    );
    assert!(dockerfile.contains("RUN cargo auditable build --release --locked --bin ocifit"));
    let image = steps(&workflow["jobs"]["build"])
        .iter()
        .find(|s| uses(s, "docker/build-push-action"))
        .expect("the image build");
    let args = image["with"]["build-args"]
        .as_str()
        .expect("build arguments");
    assert!(
        args.lines()
            .any(|l| l == "CARGO_AUDITABLE_VERSION=${{ env.CARGO_AUDITABLE_VERSION }}"),
        "{args}"
    );
}

#[test]
fn the_install_docs_verify_the_identity_this_workflow_signs_with() {
    let docs = read("docs/install.md");
    let (_, section) = docs
        .split_once("## Verifying a release\n")
        .expect("docs/install.md has \"Verifying a release\"");
    let section = section.split("\n## ").next().unwrap_or_default();
    // GitHub's OIDC certificates name https://github.com/OWNER/REPO/WORKFLOW@REF.
    let source = read("Dockerfile")
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("org.opencontainers.image.source=\"")
                .map(|s| s.trim_end_matches(['"', '\\', ' ']).to_owned())
        })
        .expect("the Dockerfile names the source repository");
    let identity = format!(
        "{source}/{WORKFLOW}@refs/tags/v{}",
        env!("CARGO_PKG_VERSION")
    );
    let regexp = section
        .lines()
        .find_map(|l| l.strip_prefix("IDENTITY='"))
        .and_then(|l| l.strip_suffix('\''))
        .expect("an IDENTITY='…' line");
    let pattern = regex::Regex::new(regexp).expect("the identity is a regular expression");
    assert!(pattern.is_match(&identity), "{regexp} refuses {identity}");
    for other in [
        format!("{source}/.github/workflows/ci.yaml@refs/tags/v1.0.0"),
        format!("{source}/{WORKFLOW}@refs/heads/main"),
        format!("{source}x/{WORKFLOW}@refs/tags/v1.0.0"),
    ] {
        assert!(!pattern.is_match(&other), "{regexp} accepts {other}");
    }
    assert!(section.contains(&format!("ISSUER={ISSUER}\n")), "{section}");
    assert!(section.contains(&format!("`{identity}`")), "{section}");
    let repository = source.trim_start_matches("https://github.com/");
    let signer = format!("--signer-workflow {repository}/{WORKFLOW}");
    for command in [
        "cosign verify ghcr.io/ocifit/ocifit:",
        "cosign verify ghcr.io/ocifit/charts/ocifit:",
        "cosign verify-attestation --type spdxjson",
        "cosign verify-blob ocifit-",
        "--bundle ocifit-",
        "gh attestation verify oci://ghcr.io/ocifit/ocifit:",
        "gh attestation verify oci://ghcr.io/ocifit/charts/ocifit:",
        "gh attestation verify ocifit-",
        &signer,
    ] {
        assert!(section.contains(command), "no `{command}` in:\n{section}");
    }
    let workflow = workflow();
    let chart = format!(
        "{}/ocifit:",
        workflow["env"]["CHART_REPOSITORY"]
            .as_str()
            .expect("the chart repository")
    );
    assert!(section.contains(&chart), "{chart}");
    let image = format!("{}:", workflow["env"]["IMAGE"].as_str().expect("IMAGE"));
    assert!(section.contains(&image), "{image}");
}
