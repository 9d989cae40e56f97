//! Which referrer of an image is its NFD compatibility artifact: those with the NFD artifactType,
//! newest by `org.opencontainers.image.created`. Pure: no I/O.

use jiff::Timestamp;

use super::manifest::{CREATED_ANNOTATION, Descriptor};
use crate::engine::NFD_ARTIFACT_TYPE;

/// Picks the newest NFD artifact among an image's referrers, filtered here too since the
/// referrers tag fallback cannot filter. An undated entry is older than any dated one; on equal
/// times the one listed last wins, as registries append.
pub(super) fn newest_nfd_referrer(referrers: &[Descriptor]) -> Option<&Descriptor> {
    referrers
        .iter()
        .filter(|d| d.artifact_type.as_deref() == Some(NFD_ARTIFACT_TYPE))
        .max_by_key(|d| created(d))
}

fn created(descriptor: &Descriptor) -> Option<Timestamp> {
    descriptor
        .annotations
        .get(CREATED_ANNOTATION)
        .and_then(|text| text.parse::<Timestamp>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn referrer(n: u8, artifact_type: &str, created: Option<&str>) -> Descriptor {
        Descriptor {
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            digest: format!("sha256:{}", format!("{n:02x}").repeat(32)),
            artifact_type: Some(artifact_type.into()),
            annotations: created
                .map(|c| [(CREATED_ANNOTATION.to_string(), c.to_string())].into())
                .unwrap_or_default(),
            ..Descriptor::default()
        }
    }

    fn pick(list: &[Descriptor]) -> Option<String> {
        newest_nfd_referrer(list).map(|d| d.digest[7..9].to_string())
    }

    #[test]
    fn newest_created_nfd_artifact_wins() {
        let list = [
            referrer(1, NFD_ARTIFACT_TYPE, Some("2025-01-01T00:00:00Z")),
            referrer(2, NFD_ARTIFACT_TYPE, Some("2026-03-01T10:00:00+02:00")),
            referrer(3, NFD_ARTIFACT_TYPE, Some("2025-12-31T23:59:59Z")),
        ];
        assert_eq!(pick(&list).as_deref(), Some("02"));
    }

    #[test]
    fn other_artifact_types_are_ignored_even_when_newer() {
        let list = [
            referrer(1, NFD_ARTIFACT_TYPE, Some("2025-01-01T00:00:00Z")),
            referrer(
                2,
                "application/vnd.dev.cosign.artifact.sig.v1+json",
                Some("2026-01-01T00:00:00Z"),
            ),
        ];
        assert_eq!(pick(&list).as_deref(), Some("01"));
    }

    #[test]
    fn dated_artifact_beats_undated_and_unparsable_ones() {
        let list = [
            referrer(1, NFD_ARTIFACT_TYPE, None),
            referrer(2, NFD_ARTIFACT_TYPE, Some("2020-01-01T00:00:00Z")),
            referrer(3, NFD_ARTIFACT_TYPE, Some("yesterday")),
        ];
        assert_eq!(pick(&list).as_deref(), Some("02"));
    }

    #[test]
    fn without_dates_the_last_listed_wins() {
        let list = [
            referrer(1, NFD_ARTIFACT_TYPE, None),
            referrer(2, NFD_ARTIFACT_TYPE, None),
        ];
        assert_eq!(pick(&list).as_deref(), Some("02"));
    }

    #[test]
    fn no_nfd_referrer_is_none() {
        assert_eq!(pick(&[referrer(1, "application/spdx+json", None)]), None);
        assert_eq!(pick(&[]), None);
    }
}
