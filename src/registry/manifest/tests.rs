use super::*;

const ORAS_MANIFEST: &str = r#"{
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.manifest.v1+json",
  "config": {"mediaType": "application/vnd.unknown.config.v1+json", "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "size": 2},
  "layers": [{"mediaType": "application/vnd.oci.image.compatibilities.v1+json",
              "digest": "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", "size": 6,
              "annotations": {"org.opencontainers.image.title": "compat.json"}}],
  "annotations": {"org.opencontainers.image.created": "2026-11-22T04:00:00Z"}
}"#;

#[test]
fn oras_artifact_manifest_parses_as_an_image_manifest() {
    let Manifest::Image(m) = Manifest::parse(ORAS_MANIFEST.as_bytes(), None).unwrap() else {
        panic!("expected an image manifest");
    };
    assert_eq!(m.layers.len(), 1);
    assert_eq!(
        m.layers[0].media_type,
        "application/vnd.oci.image.compatibilities.v1+json"
    );
    assert_eq!(m.layers[0].size, 6);
    assert_eq!(
        m.config.media_type,
        "application/vnd.unknown.config.v1+json"
    );
}

#[test]
fn docker_manifest_list_without_body_media_type_uses_the_header() {
    let body = br#"{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"sha256:aa","size":1,"platform":{"os":"linux","architecture":"amd64"}}]}"#;
    let parsed = Manifest::parse(
        body,
        Some("application/vnd.docker.distribution.manifest.list.v2+json; charset=utf-8"),
    )
    .unwrap();
    let Manifest::Index(index) = parsed else {
        panic!("expected an index")
    };
    assert_eq!(
        index.manifests[0].platform.as_ref().map(|p| p.os.as_str()),
        Some("linux")
    );
}

#[test]
fn index_shape_without_any_media_type_is_an_index() {
    let body = br#"{"schemaVersion":2,"manifests":[]}"#;
    assert!(matches!(
        Manifest::parse(body, None),
        Ok(Manifest::Index(_))
    ));
}

#[test]
fn schema_1_and_foreign_media_types_are_rejected() {
    let v1 = br#"{"schemaVersion":1,"name":"x","fsLayers":[]}"#;
    assert!(matches!(
        Manifest::parse(v1, None),
        Err(ContentProblem::NotAManifest(_))
    ));
    let foreign = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.artifact.manifest.v1+json","blobs":[]}"#;
    assert!(matches!(
        Manifest::parse(foreign, None),
        Err(ContentProblem::UnsupportedMediaType(_))
    ));
    assert!(matches!(
        Manifest::parse(b"<html>", None),
        Err(ContentProblem::NotAManifest(_))
    ));
}

#[test]
fn image_manifest_without_config_is_rejected() {
    let body = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}"#;
    assert!(matches!(
        Manifest::parse(body, None),
        Err(ContentProblem::NotAManifest(_))
    ));
}

#[test]
fn sha256_digest_of_known_content() {
    assert_eq!(
        sha256_digest(b"{}"),
        "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
}

#[test]
fn digest_verification_accepts_matching_and_rejects_other_content() {
    let d = sha256_digest(b"hello");
    assert_eq!(verify_digest(&d, b"hello"), Ok(()));
    assert!(matches!(
        verify_digest(&d, b"hellO"),
        Err(ContentProblem::DigestMismatch { .. })
    ));
    let sha512 = "sha512:9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043";
    assert_eq!(verify_digest(sha512, b"hello"), Ok(()));
    assert!(matches!(
        verify_digest("md5:abc", b"hello"),
        Err(ContentProblem::UnsupportedDigest(_))
    ));
}

#[test]
fn only_well_formed_digests_are_valid() {
    assert!(is_valid_digest(&sha256_digest(b"x")));
    assert!(!is_valid_digest("sha256:ABC"));
    assert!(!is_valid_digest("sha256:../../etc"));
    assert!(!is_valid_digest(&format!("sha256:{}", "g".repeat(64))));
    assert!(!is_valid_digest("nocolon"));
}

mod layers {
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

mod referrers {
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
