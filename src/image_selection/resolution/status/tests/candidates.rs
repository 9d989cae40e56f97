//! Candidates mode: each candidate image with its own NFD artifact, a candidate without one
//! skipped with the reason, indexes as the spec lists them.

use super::*;
use crate::api::Candidate as SpecCandidate;
use crate::image_selection::resolution::candidates_digest;

const AVX512: &str = r#"
version: v1alpha1
compatibilities:
- tag: fast
  description: "AVX-512 build"
  rules:
  - name: avx512
    matchFeatures:
    - feature: cpu.cpuid
      matchExpressions:
        AVX512F: {op: Exists}
"#;

const ANYWHERE: &str = "version: v1alpha1\ncompatibilities:\n- tag: portable\n  rules: []\n";

fn nfd(yaml: &str) -> Artifact {
    Artifact::parse(Format::Nfd, yaml.as_bytes()).unwrap()
}

fn attached(image: &str, weight: i32, digest: &str, yaml: &str) -> CandidateArtifact {
    CandidateArtifact {
        image: image.into(),
        weight,
        artifact: Ok(AttachedArtifact {
            digest: digest.into(),
            artifact: nfd(yaml),
        }),
    }
}

fn missing(image: &str, weight: i32) -> CandidateArtifact {
    let (repository, tag) = image.split_once(':').expect("a tagged image");
    CandidateArtifact {
        image: image.into(),
        weight,
        artifact: Err(crate::registry::ResolveError::Registry(
            crate::registry::Error::NotFound {
                target: crate::registry::Target {
                    registry: "registry.example.com".into(),
                    repository: repository.into(),
                    reference: tag.into(),
                },
                what: "NFD compatibility artifact referring to the image",
            },
        )),
    }
}

/// The spec lists `missing:v1` (weight 30), `fast:v1` (20), `portable:v1` (0).
fn candidates(fast_digest: &str) -> Resolved {
    let found = vec![
        missing("missing:v1", 30),
        attached("fast:v1", 20, fast_digest, AVX512),
        attached("portable:v1", 0, "sha256:p1", ANYWHERE),
    ];
    Resolved {
        digest: candidates_digest(&found),
        format: Format::Nfd,
        content: Content::Candidates(found),
    }
}

fn cpu_node(name: &str, avx512: bool) -> (String, NodeInputs) {
    let mut labels = BTreeMap::from([
        ("kubernetes.io/arch".to_owned(), "amd64".to_owned()),
        ("kubernetes.io/os".to_owned(), "linux".to_owned()),
    ]);
    if avx512 {
        labels.insert(
            "feature.node.kubernetes.io/cpu-cpuid.AVX512F".into(),
            "true".into(),
        );
    }
    (name.to_owned(), NodeInputs::new(labels))
}

fn case() -> Case {
    let mut case = Case::new();
    case.spec.artifact.reference = None;
    case.spec.artifact.candidates = Some(
        [("missing:v1", 30), ("fast:v1", 20), ("portable:v1", 0)]
            .iter()
            .map(|(image, weight)| SpecCandidate {
                image: (*image).into(),
                weight: *weight,
            })
            .collect(),
    );
    case.nodes = vec![cpu_node("avx", true), cpu_node("plain", false)];
    case.platforms = amd64(&["fast:v1", "portable:v1"]);
    case
}

fn row(status: &ImageSelectionPolicyStatus, node_has_avx512: bool) -> &ClassStatus {
    status
        .classes
        .iter()
        .find(|c| c.labels.contains_key("cpu.cpuid.flags/AVX512F") == node_has_avx512)
        .unwrap_or_else(|| panic!("no such class in {:?}", status.classes))
}

#[test]
fn each_class_gets_the_best_candidate_whose_own_artifact_matches() {
    let resolved = candidates("sha256:f1");
    let out = case().current(&resolved, None, 0);
    let fast = row(&out.status, true);
    assert_eq!(fast.image.as_deref(), Some("fast:v1"));
    let matched = fast.matched.as_ref().unwrap();
    assert_eq!(
        (matched.index, matched.tag.as_str(), matched.weight),
        (1, "fast:v1", 20),
        "the index is the candidate's position in the spec"
    );
    assert_eq!(matched.description.as_deref(), Some("AVX-512 build"));
    let plain = row(&out.status, false);
    assert_eq!(plain.image.as_deref(), Some("portable:v1"));
    assert_eq!(plain.matched.as_ref().unwrap().index, 2);
    assert_eq!(
        state(condition(&out.status, ConditionType::Ready)),
        ("True", "Resolved")
    );
}

#[test]
fn a_candidate_without_an_artifact_is_skipped_and_every_row_says_why() {
    let resolved = candidates("sha256:f1");
    let out = case().current(&resolved, None, 0);
    for class in &out.status.classes {
        let reason = class.reason.as_deref().unwrap();
        assert!(
            reason.contains(
                "skipped candidate 0 (\"missing:v1\"): NFD compatibility artifact referring to \
                 the image not found: registry.example.com/missing:v1"
            ),
            "{reason}"
        );
    }
    let resolved_condition = condition(&out.status, ConditionType::ArtifactResolved);
    assert_eq!(state(resolved_condition), ("True", "Fetched"));
    assert!(
        resolved_condition
            .message
            .starts_with("2 of 3 candidate images have an nfd artifact"),
        "{}",
        resolved_condition.message
    );
}

#[test]
fn the_status_names_the_nfd_format_and_a_digest_of_the_candidates_artifacts() {
    let resolved = candidates("sha256:f1");
    let out = case().current(&resolved, None, 0);
    let artifact = out.status.artifact.as_ref().unwrap();
    assert_eq!(artifact.format, Format::Nfd);
    assert_eq!(artifact.candidates, 2);
    assert_eq!(artifact.digest, resolved.digest);
    assert!(artifact.digest.starts_with("sha256:"));
    assert!(
        out.status
            .class_keys
            .as_ref()
            .unwrap()
            .features
            .contains_key("cpu.cpuid"),
        "{:?}",
        out.status.class_keys
    );
}

#[test]
fn the_candidates_digest_changes_with_any_candidates_artifact_and_only_then() {
    assert_eq!(
        candidates("sha256:f1").digest,
        candidates("sha256:f1").digest
    );
    assert_ne!(
        candidates("sha256:f1").digest,
        candidates("sha256:f2").digest
    );
}

#[test]
fn a_candidate_that_cannot_run_on_the_class_arch_gives_way_to_the_next() {
    let resolved = candidates("sha256:f1");
    let mut case = case();
    case.platforms = amd64(&["portable:v1"]);
    case.platforms.insert(
        "fast:v1".into(),
        PlatformLookup::Known(vec![linux("arm64", Some("v8"))]),
    );
    let out = case.current(&resolved, None, 0);
    let avx = row(&out.status, true);
    assert_eq!(avx.image.as_deref(), Some("portable:v1"));
    let reason = avx.reason.as_deref().unwrap();
    assert!(
        reason.contains(
            "skipped candidate 1 (\"fast:v1\"): fast:v1 is not built for linux/amd64 (it offers linux/arm64/v8)"
        ),
        "{reason}"
    );
}

#[test]
fn the_platforms_looked_up_are_those_of_candidates_with_an_artifact() {
    assert_eq!(candidates("sha256:f1").images(), ["fast:v1", "portable:v1"]);
}
