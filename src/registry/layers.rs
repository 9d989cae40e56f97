//! Which layer of an artifact manifest holds the compatibility document, decided by media type
//! only (never by trying to parse). Pure: no I/O.

use super::error::ContentProblem;
use super::manifest::{Descriptor, ImageManifest};
use crate::engine::{Format, NFD_ARTIFACT_TYPE, NFD_LAYER_MEDIA_TYPE, OCIFIT_LAYER_MEDIA_TYPE};

/// The chosen layer and the format it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChosenLayer {
    pub format: Format,
    pub layer: Descriptor,
}

/// Picks the one compatibility layer of an artifact manifest: the ocifit or NFD media type, else
/// an NFD artifact's only layer whatever its media type (as NFD's client reads layer 0). Two
/// candidates, or none, are an error rather than a guess.
pub(super) fn choose_layer(manifest: &ImageManifest) -> Result<ChosenLayer, ContentProblem> {
    let known: Vec<ChosenLayer> = manifest
        .layers
        .iter()
        .filter_map(|layer| {
            let format = match layer.media_type.as_str() {
                OCIFIT_LAYER_MEDIA_TYPE => Format::Ocifit,
                NFD_LAYER_MEDIA_TYPE => Format::Nfd,
                _ => return None,
            };
            Some(ChosenLayer {
                format,
                layer: layer.clone(),
            })
        })
        .collect();
    match known.as_slice() {
        [one] => return Ok(one.clone()),
        [] => {}
        many => {
            return Err(ContentProblem::AmbiguousLayers {
                found: many.iter().map(|c| c.layer.media_type.clone()).collect(),
            });
        }
    }
    let nfd_artifact = manifest.artifact_type.as_deref() == Some(NFD_ARTIFACT_TYPE)
        || manifest.config.media_type == NFD_ARTIFACT_TYPE;
    if let (true, [only]) = (nfd_artifact, manifest.layers.as_slice()) {
        return Ok(ChosenLayer {
            format: Format::Nfd,
            layer: only.clone(),
        });
    }
    let mut found: Vec<String> = manifest.artifact_type.iter().cloned().collect();
    found.extend(manifest.layers.iter().map(|l| l.media_type.clone()));
    Err(ContentProblem::NoKnownLayer {
        expected: format!("{OCIFIT_LAYER_MEDIA_TYPE} or {NFD_LAYER_MEDIA_TYPE}"),
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(media_type: &str, n: u8) -> Descriptor {
        Descriptor {
            media_type: media_type.into(),
            digest: format!("sha256:{}", format!("{n:02x}").repeat(32)),
            size: 10,
            ..Descriptor::default()
        }
    }

    fn manifest(artifact_type: Option<&str>, layers: Vec<Descriptor>) -> ImageManifest {
        ImageManifest {
            artifact_type: artifact_type.map(str::to_string),
            config: layer("application/vnd.oci.empty.v1+json", 0),
            layers,
        }
    }

    #[test]
    fn oras_pushed_ocifit_layer_is_chosen_whatever_the_artifact_type() {
        let m = manifest(
            Some("application/vnd.unknown.artifact.v1"),
            vec![layer(OCIFIT_LAYER_MEDIA_TYPE, 1)],
        );
        let chosen = choose_layer(&m).unwrap();
        assert_eq!(chosen.format, Format::Ocifit);
        assert_eq!(chosen.layer, layer(OCIFIT_LAYER_MEDIA_TYPE, 1));
    }

    #[test]
    fn nfd_layer_is_chosen_among_unrelated_layers() {
        let m = manifest(
            Some(NFD_ARTIFACT_TYPE),
            vec![layer("text/plain", 1), layer(NFD_LAYER_MEDIA_TYPE, 2)],
        );
        let chosen = choose_layer(&m).unwrap();
        assert_eq!(
            (chosen.format, chosen.layer.digest),
            (Format::Nfd, layer("", 2).digest)
        );
    }

    #[test]
    fn nfd_artifact_type_with_a_single_generic_layer_reads_that_layer_as_nfd() {
        let m = manifest(Some(NFD_ARTIFACT_TYPE), vec![layer("application/yaml", 3)]);
        assert_eq!(choose_layer(&m).unwrap().format, Format::Nfd);
    }

    #[test]
    fn nfd_config_media_type_counts_as_the_artifact_type() {
        let mut m = manifest(None, vec![layer("application/octet-stream", 3)]);
        m.config.media_type = NFD_ARTIFACT_TYPE.into();
        assert_eq!(choose_layer(&m).unwrap().format, Format::Nfd);
    }

    #[test]
    fn unknown_layers_are_an_error_listing_what_was_found() {
        let m = manifest(
            Some("application/vnd.acme.thing"),
            vec![layer("text/plain", 1), layer("application/json", 2)],
        );
        let err = choose_layer(&m).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ContentProblem::NoKnownLayer { .. }));
        for mt in [
            "application/vnd.acme.thing",
            "text/plain",
            "application/json",
            OCIFIT_LAYER_MEDIA_TYPE,
        ] {
            assert!(text.contains(mt), "{text}");
        }
    }

    #[test]
    fn manifest_without_layers_is_an_error_saying_none_were_found() {
        let err = choose_layer(&manifest(None, vec![])).unwrap_err();
        assert!(
            err.to_string().ends_with("found media types: none"),
            "{err}"
        );
    }

    #[test]
    fn nfd_artifact_type_with_several_generic_layers_is_not_guessed() {
        let m = manifest(
            Some(NFD_ARTIFACT_TYPE),
            vec![layer("a/b", 1), layer("c/d", 2)],
        );
        assert!(matches!(
            choose_layer(&m),
            Err(ContentProblem::NoKnownLayer { .. })
        ));
    }

    #[test]
    fn two_compatibility_layers_are_ambiguous() {
        let m = manifest(
            None,
            vec![
                layer(OCIFIT_LAYER_MEDIA_TYPE, 1),
                layer(NFD_LAYER_MEDIA_TYPE, 2),
            ],
        );
        assert!(matches!(
            choose_layer(&m),
            Err(ContentProblem::AmbiguousLayers { .. })
        ));
    }
}
