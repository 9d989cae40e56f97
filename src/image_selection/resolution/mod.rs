//! Image selection's decision, which every face of image selection shares: from what a policy's
//! compatibility information resolved to ([`Resolved`]: the parsed artifact, or each candidate
//! image with its NFD artifact, with digest and format), which nodes count, the classes they
//! form and the best image for each class, explained, where a candidate must also run on the
//! class's os/arch by the platforms the registry read from it (`runs_on`, by the one platform
//! model) ([`resolve_classes`]); and the policy status built from it ([`status`]). `ocifit
//! resolve` prints it, the controller writes it and the webhook's planner reads that status;
//! none has a second copy of any rule. Pure: it must not fetch, watch or read a clock.

use std::collections::BTreeMap;
use std::fmt::Display;

use crate::classes::{NodeClass, group, node_counts};
use crate::engine::{
    Artifact, Candidate, Explanation, Format, Mode, NodeInputs, Reads, SetStatus, best_candidate,
};
use crate::platform::{NodePlatform, Platform};
use crate::registry::{ResolveError, sha256_digest};
use crate::telemetry::error_chain;

mod status;
pub use status::ArtifactState;
pub(super) use status::{Event, EventKind, Failure};
pub use status::{StatusInputs, StatusLimits, policy_status};

/// Where the candidates come from: the sets of one artifact, or candidate images each with its
/// own NFD artifact.
#[derive(Clone, Copy, Debug)]
pub(super) enum Choice<'a> {
    /// `spec.artifact.ref`: the sets of one artifact.
    Sets(&'a Artifact),
    /// `spec.artifact.candidates`: images with their own artifacts.
    Candidates(&'a [Candidate<'a>]),
}

impl Choice<'_> {
    /// What the rules read from a node (the union over candidates).
    pub(super) fn reads(&self) -> Reads {
        match self {
            Choice::Sets(artifact) => artifact.reads(),
            Choice::Candidates(candidates) => {
                let mut reads = Reads::default();
                for candidate in *candidates {
                    reads.extend(&candidate.artifact.reads());
                }
                reads
            }
        }
    }

    fn best_fit<E: Display>(
        &self,
        inputs: &NodeInputs,
        platform: impl FnMut(&str) -> Result<(), E>,
    ) -> Explanation {
        match self {
            Choice::Sets(artifact) => artifact.best_fit(inputs, platform),
            Choice::Candidates(candidates) => best_candidate(candidates, inputs, platform),
        }
    }
}

/// One node class and the answer for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ResolvedClass {
    /// The class: name, distinguishing labels, nodes.
    pub class: NodeClass,
    /// The chosen image (if any) and why, set by set.
    pub explanation: Explanation,
}

#[cfg(test)]
impl ResolvedClass {
    /// The image for the class's nodes, if any candidate fits.
    pub(super) fn image(&self) -> Option<&str> {
        self.explanation.image()
    }
}

/// Resolves every class of the nodes that count under `node_selector` (empty: all but control-plane
/// nodes). `platform(class, image)` says whether `image` runs on the class (`Err` skips it there);
/// pass `|_, _| Ok::<(), Infallible>(())` where platforms are unknown.
pub(super) fn resolve<'n, E: Display>(
    choice: Choice<'_>,
    node_selector: &BTreeMap<String, String>,
    nodes: impl IntoIterator<Item = (&'n str, &'n NodeInputs)>,
    mut platform: impl FnMut(&NodeClass, &str) -> Result<(), E>,
) -> Vec<ResolvedClass> {
    let counted = nodes
        .into_iter()
        .filter(|(_, inputs)| node_counts(node_selector, &inputs.labels));
    group(&choice.reads(), counted)
        .into_iter()
        .map(|class| {
            let explanation = choice.best_fit(&class.inputs, |image| platform(&class, image));
            ResolvedClass { class, explanation }
        })
        .collect()
}

/// One class of a policy's nodes and its answer, for either kind of content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassAnswer {
    /// The class: name, distinguishing labels, nodes.
    pub class: NodeClass,
    /// The chosen image (if any) and why, candidate by candidate, numbered as the policy lists
    /// them.
    pub explanation: Explanation,
    /// Candidates the engine never saw (candidates mode: no artifact), with why.
    pub left_out: Vec<String>,
}

impl ClassAnswer {
    /// The image for the class's nodes, if any candidate fits.
    pub fn image(&self) -> Option<&str> {
        self.explanation.image()
    }

    /// Why, in one line: the explanation's summary, then every candidate skipped for the class
    /// (platform) and every candidate left out (no artifact). The status row's `reason`.
    pub fn reason(&self) -> String {
        let explanation = &self.explanation;
        let mut reason = explanation.summary();
        if explanation.chosen.is_some() {
            let what = match explanation.mode {
                Mode::Sets => "set",
                Mode::Candidates => "candidate",
            };
            let skipped: Vec<String> = explanation
                .sets
                .iter()
                .filter(|s| s.status == SetStatus::Skipped)
                .map(|s| {
                    format!(
                        "skipped {what} {} ({:?}): {}",
                        s.index,
                        s.tag,
                        s.reason
                            .as_deref()
                            .unwrap_or("refused by the platform check")
                    )
                })
                .collect();
            if !skipped.is_empty() {
                reason = format!("{reason}; {}", skipped.join("; "));
            }
        }
        if !self.left_out.is_empty() {
            reason = format!("{reason}; {}", self.left_out.join("; "));
        }
        reason
    }
}

/// The whole decision for a policy: every class of the nodes that count under `node_selector`
/// and its best image, where a candidate must also run on the class's os/arch as `platforms`
/// says (see `runs_on`).
pub fn resolve_classes<'n>(
    resolved: &Resolved,
    node_selector: &BTreeMap<String, String>,
    nodes: impl IntoIterator<Item = (&'n str, &'n NodeInputs)>,
    platforms: &Platforms,
) -> Vec<ClassAnswer> {
    let platform = |class: &NodeClass, image: &str| runs_on(class, image, platforms);
    match &resolved.content {
        Content::Sets(artifact) => resolve(Choice::Sets(artifact), node_selector, nodes, platform)
            .into_iter()
            .map(|answer| ClassAnswer {
                class: answer.class,
                explanation: answer.explanation,
                left_out: Vec::new(),
            })
            .collect(),
        Content::Candidates(all) => {
            // The engine sees only candidates with an artifact; `positions` maps its indexes
            // back to the spec's, and every class names the candidates left out.
            let mut positions = Vec::new();
            let mut candidates = Vec::new();
            let mut left_out = Vec::new();
            for (position, candidate) in all.iter().enumerate() {
                match &candidate.artifact {
                    Ok(attached) => {
                        positions.push(position);
                        candidates.push(Candidate {
                            image: &candidate.image,
                            weight: candidate.weight,
                            artifact: &attached.artifact,
                        });
                    }
                    Err(why) => left_out.push(format!(
                        "skipped candidate {position} ({:?}): {}",
                        candidate.image,
                        error_chain(why)
                    )),
                }
            }
            resolve(
                Choice::Candidates(&candidates),
                node_selector,
                nodes,
                platform,
            )
            .into_iter()
            .map(|mut answer| {
                renumber(&mut answer.explanation, &positions);
                ClassAnswer {
                    class: answer.class,
                    explanation: answer.explanation,
                    left_out: left_out.clone(),
                }
            })
            .collect()
        }
    }
}

/// Gives an explanation's candidates their positions in the spec.
fn renumber(explanation: &mut Explanation, positions: &[usize]) {
    let at = |index: usize| positions.get(index).copied().unwrap_or(index);
    if let Some(chosen) = &mut explanation.chosen {
        chosen.index = at(chosen.index);
    }
    for outcome in &mut explanation.sets {
        outcome.index = at(outcome.index);
    }
}

/// What a policy's compatibility information resolved to, and where it came from.
#[derive(Debug)]
pub struct Resolved {
    /// `ref` mode: the artifact manifest's digest. Candidates mode: `candidates_digest` of the
    /// candidates' artifacts, so it changes whenever any candidate's artifact does.
    pub digest: String,
    /// Its format (from the layer's media type); `nfd` in candidates mode.
    pub format: Format,
    /// The parsed artifact, or the candidates with theirs.
    pub content: Content,
}

/// The parsed compatibility information of a policy.
#[derive(Debug)]
pub enum Content {
    /// `spec.artifact.ref`: the sets of one artifact.
    Sets(Artifact),
    /// `spec.artifact.candidates`, in the order the spec lists them.
    Candidates(Vec<CandidateArtifact>),
}

/// One candidate image of `spec.artifact.candidates` and its NFD artifact.
#[derive(Debug)]
pub struct CandidateArtifact {
    /// The image reference, as the spec spells it.
    pub image: String,
    /// Its weight from the spec.
    pub weight: i32,
    /// The NFD artifact attached to it, or why it has none (the candidate is then skipped for
    /// every class, and each class row says so).
    pub artifact: Result<AttachedArtifact, ResolveError>,
}

/// An NFD artifact found among an image's referrers.
#[derive(Debug)]
pub struct AttachedArtifact {
    /// The artifact manifest's digest.
    pub digest: String,
    pub artifact: Artifact,
}

impl Resolved {
    /// What the rules read from a node (the union over candidates in candidates mode).
    pub fn reads(&self) -> Reads {
        match &self.content {
            Content::Sets(artifact) => artifact.reads(),
            Content::Candidates(candidates) => {
                let mut reads = Reads::default();
                for attached in candidates.iter().filter_map(|c| c.artifact.as_ref().ok()) {
                    reads.extend(&attached.artifact.reads());
                }
                reads
            }
        }
    }

    /// The candidate images whose platforms the status needs, each once, sorted: every
    /// non-empty set tag, or every candidate with an artifact.
    pub fn images(&self) -> Vec<String> {
        let mut images: Vec<String> = match &self.content {
            Content::Sets(artifact) => artifact
                .sets()
                .iter()
                .map(|set| set.tag().to_owned())
                .filter(|tag| !tag.is_empty())
                .collect(),
            Content::Candidates(candidates) => candidates
                .iter()
                .filter(|c| c.artifact.is_ok())
                .map(|c| c.image.clone())
                .collect(),
        };
        images.sort();
        images.dedup();
        images
    }

    /// How many candidates there are: sets of the artifact, or candidate images with an
    /// artifact.
    pub fn candidate_count(&self) -> usize {
        match &self.content {
            Content::Sets(artifact) => artifact.sets().len(),
            Content::Candidates(candidates) => {
                candidates.iter().filter(|c| c.artifact.is_ok()).count()
            }
        }
    }
}

/// The digest of candidates mode: `sha256` over one `image weight artifact-digest` line per
/// candidate with an artifact, in spec order. It names the exact set of artifacts the status was
/// computed from, as the manifest digest does in `ref` mode.
pub(crate) fn candidates_digest(candidates: &[CandidateArtifact]) -> String {
    let mut text = String::new();
    for candidate in candidates {
        if let Ok(attached) = &candidate.artifact {
            text.push_str(&format!(
                "{} {} {}\n",
                candidate.image, candidate.weight, attached.digest
            ));
        }
    }
    sha256_digest(text.as_bytes())
}

/// What is known about one candidate image's platforms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlatformLookup {
    /// The platforms the image (index or config) names.
    Known(Vec<Platform>),
    /// The platforms could not be read; the message says why (registry or reference error).
    /// The image is refused for every class.
    Failed(String),
    /// The platforms were not looked at (`ocifit resolve --offline`, or its registry could not
    /// be reached); the message says why. The image is taken to run anywhere.
    NotChecked(String),
}

/// Every candidate image's lookup, by image reference as the artifact spells it.
pub type Platforms = BTreeMap<String, PlatformLookup>;

/// Why an image does not run on a class's nodes (each class row shows it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotRunnable {
    #[error("the platforms of {image} were not looked up")]
    NotLookedUp { image: String },
    #[error("failed to read the platforms of {image}: {why}")]
    Unreadable { image: String, why: String },
    /// `offered` lists the image's platforms as it spells them, or says it offers none.
    #[error("{image} is not built for {node} (it offers {offered})")]
    NotBuiltFor {
        image: String,
        node: String,
        offered: String,
    },
}

/// `Ok` when `image` can run on the class's nodes; `Err` says why not, naming the platforms. A
/// missing os or arch label leaves that field unconstrained; nodes carry no variant label, so any
/// variant of the architecture is accepted.
fn runs_on(class: &NodeClass, image: &str, platforms: &Platforms) -> Result<(), NotRunnable> {
    let lookup = platforms
        .get(image)
        .ok_or_else(|| NotRunnable::NotLookedUp {
            image: image.to_owned(),
        })?;
    let found = match lookup {
        PlatformLookup::Known(found) => found,
        PlatformLookup::Failed(why) => {
            return Err(NotRunnable::Unreadable {
                image: image.to_owned(),
                why: why.clone(),
            });
        }
        PlatformLookup::NotChecked(_) => return Ok(()),
    };
    let node = NodePlatform::from_labels(&class.labels);
    if found.iter().any(|platform| platform.runs_on(&node)) {
        return Ok(());
    }
    let offered: Vec<String> = found.iter().map(ToString::to_string).collect();
    Err(NotRunnable::NotBuiltFor {
        image: image.to_owned(),
        node: node.to_string(),
        offered: if offered.is_empty() {
            "no platform".to_owned()
        } else {
            offered.join(", ")
        },
    })
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;
    use crate::engine::Format;

    const FLAVORS: &str = include_str!("../../../example/flavor-compat.json");

    fn node(labels: &[(&str, &str)]) -> NodeInputs {
        NodeInputs::new(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    fn flavor(f: &str) -> NodeInputs {
        node(&[
            ("feature.node.ocifit-k8s.flavor", f),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
        ])
    }

    #[test]
    fn each_flavor_class_gets_its_image_and_control_plane_is_left_out() {
        let artifact = Artifact::parse(Format::Ocifit, FLAVORS.as_bytes()).unwrap();
        let mut control_plane = flavor("vanilla");
        control_plane.labels.insert(
            "node-role.kubernetes.io/control-plane".into(),
            String::new(),
        );
        let nodes = [
            ("a", flavor("vanilla")),
            ("b", flavor("chocolate")),
            ("c", flavor("strawberry")),
            ("d", flavor("vanilla")),
            ("cp", control_plane),
        ];
        let resolved = resolve(
            Choice::Sets(&artifact),
            &BTreeMap::new(),
            nodes.iter().map(|(n, i)| (*n, i)),
            |_, _| Ok::<(), Infallible>(()),
        );
        let by_image: BTreeMap<_, _> = resolved
            .iter()
            .map(|r| (r.image().unwrap().to_owned(), r.class.nodes.clone()))
            .collect();
        assert_eq!(by_image["debian:11"], ["a", "d"]);
        assert_eq!(by_image["ubuntu:24.04"], ["b"]);
        assert_eq!(by_image["rockylinux:9"], ["c"]);
        assert_eq!(resolved.len(), 3);
    }

    #[test]
    fn a_node_selector_naming_the_control_plane_counts_it() {
        let artifact = Artifact::parse(Format::Ocifit, FLAVORS.as_bytes()).unwrap();
        let mut control_plane = flavor("vanilla");
        control_plane.labels.insert(
            "node-role.kubernetes.io/control-plane".into(),
            String::new(),
        );
        let selector = BTreeMap::from([(
            "node-role.kubernetes.io/control-plane".to_owned(),
            String::new(),
        )]);
        let resolved = resolve(
            Choice::Sets(&artifact),
            &selector,
            [("cp", &control_plane), ("w", &flavor("vanilla"))],
            |_, _| Ok::<(), Infallible>(()),
        );
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].class.nodes, ["cp"]);
    }

    #[test]
    fn the_platform_filter_skips_a_candidate_for_one_class_only() {
        let artifact = Artifact::parse(Format::Ocifit, FLAVORS.as_bytes()).unwrap();
        let mut arm = flavor("vanilla");
        arm.labels
            .insert("kubernetes.io/arch".into(), "arm64".into());
        let resolved = resolve(
            Choice::Sets(&artifact),
            &BTreeMap::new(),
            [("amd", &flavor("vanilla")), ("arm", &arm)],
            |class, image| match class.labels.get("kubernetes.io/arch").map(String::as_str) {
                Some("arm64") if image == "debian:11" => {
                    Err("debian:11 has no linux/arm64".to_owned())
                }
                _ => Ok(()),
            },
        );
        let amd = resolved.iter().find(|r| r.class.nodes == ["amd"]).unwrap();
        let arm = resolved.iter().find(|r| r.class.nodes == ["arm"]).unwrap();
        assert_eq!(amd.image(), Some("debian:11"));
        assert_eq!(arm.image(), None);
        assert!(
            arm.explanation
                .summary()
                .contains("debian:11 has no linux/arm64"),
            "{}",
            arm.explanation.summary()
        );
    }

    mod platform {
        use super::*;
        use crate::classes::{ARCH_LABEL, OS_LABEL};
        use crate::engine::NodeInputs;

        fn platform(os: &str, arch: &str, variant: Option<&str>) -> Platform {
            Platform::new(os, arch, variant, None).unwrap()
        }

        fn class(labels: &[(&str, &str)]) -> NodeClass {
            NodeClass {
                name: "c-0".into(),
                labels: labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                nodes: vec!["n".into()],
                selector: None,
                inputs: NodeInputs::default(),
            }
        }

        fn known(image: &str, found: Vec<Platform>) -> Platforms {
            Platforms::from([(image.to_owned(), PlatformLookup::Known(found))])
        }

        #[test]
        fn an_index_with_the_class_arch_runs_on_it() {
            let amd = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "amd64")]);
            let platforms = known(
                "app:v1",
                vec![
                    platform("linux", "arm64", Some("v8")),
                    platform("linux", "amd64", None),
                ],
            );
            assert_eq!(runs_on(&amd, "app:v1", &platforms), Ok(()));
        }

        #[test]
        fn every_spelling_of_the_class_arch_runs_on_it() {
            let arm = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "arm64")]);
            let amd = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "amd64")]);
            for (class, arch, variant) in [
                (&arm, "aarch64", None),
                (&arm, "aarch64", Some("v8")),
                (&arm, "arm64", Some("v8")),
                (&arm, "arm64", None),
                (&amd, "x86_64", None),
                (&amd, "x86-64", None),
                (&amd, "amd64", Some("v1")),
            ] {
                let platforms = known("app:v1", vec![platform("linux", arch, variant)]);
                assert_eq!(
                    runs_on(class, "app:v1", &platforms),
                    Ok(()),
                    "{arch}/{variant:?}"
                );
            }
        }

        #[test]
        fn an_aarch64_image_is_refused_on_an_amd64_class_in_its_own_spelling() {
            let amd = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "amd64")]);
            let platforms = known("app:v1", vec![platform("linux", "aarch64", None)]);
            assert_eq!(
                runs_on(&amd, "app:v1", &platforms).unwrap_err().to_string(),
                "app:v1 is not built for linux/amd64 (it offers linux/aarch64)"
            );
        }

        #[test]
        fn an_index_without_the_class_arch_is_refused_naming_what_it_offers() {
            let arm = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "arm64")]);
            let platforms = known("app:v1", vec![platform("linux", "amd64", None)]);
            let err = runs_on(&arm, "app:v1", &platforms).unwrap_err();
            assert_eq!(
                err.to_string(),
                "app:v1 is not built for linux/arm64 (it offers linux/amd64)"
            );
        }

        #[test]
        fn the_os_must_match_too() {
            let windows = class(&[(OS_LABEL, "windows"), (ARCH_LABEL, "amd64")]);
            let platforms = known("app:v1", vec![platform("linux", "amd64", None)]);
            assert!(runs_on(&windows, "app:v1", &platforms).is_err());
        }

        #[test]
        fn any_variant_of_the_arch_is_accepted() {
            let arm = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "arm")]);
            let platforms = known("app:v1", vec![platform("linux", "arm", Some("v7"))]);
            assert_eq!(runs_on(&arm, "app:v1", &platforms), Ok(()));
        }

        #[test]
        fn a_class_without_arch_or_os_labels_is_not_constrained_on_them() {
            let bare = class(&[]);
            let platforms = known("app:v1", vec![platform("linux", "s390x", None)]);
            assert_eq!(runs_on(&bare, "app:v1", &platforms), Ok(()));
        }

        #[test]
        fn a_failed_or_missing_lookup_refuses_with_the_cause() {
            let amd = class(&[(ARCH_LABEL, "amd64")]);
            let failed = Platforms::from([(
                "app:v1".to_owned(),
                PlatformLookup::Failed("manifest unknown".into()),
            )]);
            assert_eq!(
                runs_on(&amd, "app:v1", &failed).unwrap_err().to_string(),
                "failed to read the platforms of app:v1: manifest unknown"
            );
            assert!(
                runs_on(&amd, "other:v1", &failed)
                    .unwrap_err()
                    .to_string()
                    .contains("not looked up")
            );
        }

        #[test]
        fn an_image_whose_platforms_were_not_checked_runs_anywhere() {
            let arm = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "arm64")]);
            let platforms = Platforms::from([(
                "app:v1".to_owned(),
                PlatformLookup::NotChecked("--offline".into()),
            )]);
            assert_eq!(runs_on(&arm, "app:v1", &platforms), Ok(()));
        }

        #[test]
        fn an_image_with_no_platform_is_refused() {
            let amd = class(&[(ARCH_LABEL, "amd64")]);
            let err = runs_on(&amd, "app:v1", &known("app:v1", vec![])).unwrap_err();
            assert!(
                err.to_string().ends_with("(it offers no platform)"),
                "{err}"
            );
        }
    }
}
