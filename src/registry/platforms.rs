//! Which platforms an image runs on, read from its index entries or its config blob. Attestation
//! entries and `unknown/unknown` entries are not platforms. Pure: no I/O.

use serde::Deserialize;

use super::error::ContentProblem;
use super::manifest::{Descriptor, ImageIndex, PlatformField, is_index_media_type};
use crate::platform::Platform;

/// The annotation BuildKit puts on an index entry that holds provenance or SBOM attestations.
const REFERENCE_TYPE_ANNOTATION: &str = "vnd.docker.reference.type";
const ATTESTATION: &str = "attestation-manifest";

/// The platforms an image is built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePlatforms {
    /// The digest of the image's manifest or index.
    pub digest: String,
    /// os/architecture/variant (and os.version), without attestations or unknown entries.
    pub platforms: Vec<Platform>,
}

/// The platform an index entry or config blob names; `None` when it names none a node could run
/// (empty or `unknown`) or its fields are not short printable words (see [`Platform::new`]).
fn from_field(field: &PlatformField) -> Option<Platform> {
    Platform::new(
        &field.os,
        &field.architecture,
        field.variant.as_deref(),
        field.os_version.as_deref(),
    )
    .ok()
}

/// What an index says directly, and which entries must be read to learn more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct IndexPlan {
    /// Platforms named by the index entries.
    pub platforms: Vec<Platform>,
    /// Nested indexes, and image entries that name no platform (their config says).
    pub follow: Vec<Descriptor>,
}

/// Reads an index's entries: platforms it names, and entries to follow.
pub(super) fn plan_index(index: &ImageIndex) -> IndexPlan {
    let mut plan = IndexPlan::default();
    for entry in &index.manifests {
        let attestation = entry
            .annotations
            .get(REFERENCE_TYPE_ANNOTATION)
            .is_some_and(|t| t == ATTESTATION);
        if attestation {
            continue;
        }
        if is_index_media_type(&entry.media_type) {
            plan.follow.push(entry.clone());
            continue;
        }
        match &entry.platform {
            Some(field) if field.os == "unknown" || field.architecture == "unknown" => {}
            Some(field) => match from_field(field) {
                Some(platform) => plan.platforms.push(platform),
                None => plan.follow.push(entry.clone()),
            },
            None => plan.follow.push(entry.clone()),
        }
    }
    plan
}

/// Reads the platform from an image config blob; `None` when the config names none.
pub(super) fn platform_from_config(config: &[u8]) -> Result<Option<Platform>, ContentProblem> {
    #[derive(Deserialize)]
    struct Config {
        #[serde(flatten)]
        platform: PlatformField,
    }
    let parsed: Config =
        serde_json::from_slice(config).map_err(|err| ContentProblem::BadConfig(err.to_string()))?;
    Ok(from_field(&parsed.platform))
}

/// Drops repeated platforms, keeping the first occurrence's position.
pub(super) fn dedupe(platforms: Vec<Platform>) -> Vec<Platform> {
    let mut out: Vec<Platform> = Vec::with_capacity(platforms.len());
    for platform in platforms {
        if !out.contains(&platform) {
            out.push(platform);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::registry::manifest::{DOCKER_MANIFEST_LIST, OCI_INDEX, OCI_MANIFEST};

    fn entry(media_type: &str, platform: Option<(&str, &str, Option<&str>)>) -> Descriptor {
        Descriptor {
            media_type: media_type.into(),
            digest: "sha256:00".into(),
            platform: platform.map(|(os, architecture, variant)| PlatformField {
                os: os.into(),
                architecture: architecture.into(),
                variant: variant.map(str::to_string),
                os_version: None,
            }),
            ..Descriptor::default()
        }
    }

    fn p(os: &str, arch: &str, variant: Option<&str>) -> Platform {
        Platform {
            os: os.into(),
            architecture: arch.into(),
            variant: variant.map(str::to_string),
            os_version: None,
        }
    }

    #[test]
    fn index_entries_give_os_architecture_and_variant() {
        let index = ImageIndex {
            manifests: vec![
                entry(OCI_MANIFEST, Some(("linux", "amd64", None))),
                entry(OCI_MANIFEST, Some(("linux", "arm", Some("v7")))),
                entry(OCI_MANIFEST, Some(("linux", "arm64", Some("v8")))),
            ],
        };
        let plan = plan_index(&index);
        assert_eq!(
            plan.platforms,
            vec![
                p("linux", "amd64", None),
                p("linux", "arm", Some("v7")),
                p("linux", "arm64", Some("v8"))
            ]
        );
        assert!(plan.follow.is_empty());
    }

    #[test]
    fn an_index_spelling_arm64_as_aarch64_or_arm64_v8_runs_on_arm64_nodes_only() {
        use crate::platform::{ARCH_LABEL, NodePlatform, OS_LABEL};
        let index = ImageIndex {
            manifests: vec![
                entry(OCI_MANIFEST, Some(("linux", "aarch64", None))),
                entry(OCI_MANIFEST, Some(("linux", "arm64", Some("v8")))),
            ],
        };
        let node = |arch: &str| {
            NodePlatform::from_labels(&BTreeMap::from([
                (OS_LABEL.to_owned(), "linux".to_owned()),
                (ARCH_LABEL.to_owned(), arch.to_owned()),
            ]))
        };
        let plan = plan_index(&index);
        assert_eq!(plan.platforms.len(), 2, "each entry as the image spells it");
        for platform in &plan.platforms {
            assert!(platform.runs_on(&node("arm64")), "{platform}");
            assert!(!platform.runs_on(&node("amd64")), "{platform}");
        }
        let config = br#"{"architecture":"aarch64","os":"linux"}"#;
        let from_config = platform_from_config(config).unwrap().unwrap();
        assert!(from_config.runs_on(&node("arm64")));
    }

    #[test]
    fn attestation_and_unknown_entries_are_left_out() {
        let mut attestation = entry(OCI_MANIFEST, Some(("unknown", "unknown", None)));
        attestation.annotations = BTreeMap::from([(
            REFERENCE_TYPE_ANNOTATION.to_string(),
            ATTESTATION.to_string(),
        )]);
        let mut annotated_only = entry(OCI_MANIFEST, Some(("linux", "amd64", None)));
        annotated_only.annotations = attestation.annotations.clone();
        let index = ImageIndex {
            manifests: vec![
                entry(OCI_MANIFEST, Some(("linux", "amd64", None))),
                attestation,
                annotated_only,
                entry(OCI_MANIFEST, Some(("unknown", "unknown", None))),
            ],
        };
        let plan = plan_index(&index);
        assert_eq!(plan.platforms, vec![p("linux", "amd64", None)]);
        assert!(plan.follow.is_empty());
    }

    #[test]
    fn windows_os_version_is_kept() {
        let mut e = entry(OCI_MANIFEST, Some(("windows", "amd64", None)));
        if let Some(platform) = e.platform.as_mut() {
            platform.os_version = Some("10.0.20348.2113".into());
        }
        let plan = plan_index(&ImageIndex { manifests: vec![e] });
        assert_eq!(
            plan.platforms[0].os_version.as_deref(),
            Some("10.0.20348.2113")
        );
        assert_eq!(
            plan.platforms[0].to_string(),
            "windows/amd64 (10.0.20348.2113)"
        );
    }

    #[test]
    fn nested_indexes_and_entries_without_platform_are_followed() {
        let index = ImageIndex {
            manifests: vec![
                entry(OCI_INDEX, None),
                entry(DOCKER_MANIFEST_LIST, None),
                entry(OCI_MANIFEST, None),
                entry(OCI_MANIFEST, Some(("", "", None))),
            ],
        };
        let plan = plan_index(&index);
        assert!(plan.platforms.is_empty());
        assert_eq!(plan.follow.len(), 4);
    }

    #[test]
    fn config_blob_gives_the_platform_of_a_single_platform_image() {
        let config = br#"{"architecture":"arm64","variant":"v8","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[]}}"#;
        assert_eq!(
            platform_from_config(config).unwrap(),
            Some(p("linux", "arm64", Some("v8")))
        );
    }

    #[test]
    fn config_blob_without_platform_is_none_and_garbage_is_an_error() {
        assert_eq!(platform_from_config(br#"{"rootfs":{}}"#).unwrap(), None);
        assert!(matches!(
            platform_from_config(b"not json"),
            Err(ContentProblem::BadConfig(_))
        ));
    }

    #[test]
    fn entries_whose_platform_is_not_short_printable_words_name_no_platform() {
        let long = "x".repeat(65);
        for (os, arch) in [
            ("linux", long.as_str()),
            ("linux\nevil", "amd64"),
            ("li nux", "amd64"),
        ] {
            let plan = plan_index(&ImageIndex {
                manifests: vec![entry(OCI_MANIFEST, Some((os, arch, None)))],
            });
            assert!(plan.platforms.is_empty(), "{os:?}/{arch:?}");
        }
        let config = format!(r#"{{"os":"linux","architecture":"{long}"}}"#);
        assert_eq!(platform_from_config(config.as_bytes()), Ok(None));
    }

    #[test]
    fn duplicate_platforms_are_reported_once_in_first_seen_order() {
        let list = vec![
            p("linux", "arm64", None),
            p("linux", "amd64", None),
            p("linux", "arm64", None),
        ];
        assert_eq!(
            dedupe(list),
            vec![p("linux", "arm64", None), p("linux", "amd64", None)]
        );
    }
}
