use super::*;

const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn layer(digest: &str, media_type: &str, annotations: &[(&str, &str)]) -> Descriptor {
    Descriptor {
        media_type: media_type.to_string(),
        digest: digest.to_string(),
        size: 10,
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Descriptor::default()
    }
}

fn manifest(layers: Vec<Descriptor>) -> ImageManifest {
    ImageManifest {
        artifact_type: None,
        config: layer(D1, EMPTY_CONFIG_MEDIA_TYPE, &[]),
        layers,
    }
}

#[test]
fn files_are_written_under_their_titles() {
    let m = manifest(vec![
        layer(D1, FILE_MEDIA_TYPE, &[(TITLE, "a.txt")]),
        layer(D2, "text/plain", &[(TITLE, "sub/b.txt")]),
    ]);
    let paths: Vec<_> = plan_pull(&m, true)
        .unwrap()
        .into_iter()
        .map(|a| match a {
            LayerAction::File { path, .. } => path,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(paths, [PathBuf::from("a.txt"), PathBuf::from("sub/b.txt")]);
}

#[test]
fn a_layer_marked_for_unpacking_is_unpacked_with_its_tar_digest() {
    let m = manifest(vec![layer(
        D1,
        DIRECTORY_MEDIA_TYPE,
        &[(TITLE, "out"), (UNPACK, "true"), (TAR_DIGEST, D2)],
    )]);
    assert_eq!(
        plan_pull(&m, true).unwrap(),
        [LayerAction::Unpack {
            path: "out".into(),
            layer: m.layers[0].clone(),
            tar_digest: Some(D2.into()),
        }]
    );
}

#[test]
fn an_unmarked_tar_gzip_layer_is_a_directory_as_the_python_sdk_pushes_it() {
    let m = manifest(vec![layer(D1, DIRECTORY_MEDIA_TYPE, &[(TITLE, "out")])]);
    assert!(matches!(
        &plan_pull(&m, true).unwrap()[0],
        LayerAction::Unpack {
            tar_digest: None,
            ..
        }
    ));
}

#[test]
fn a_layer_marked_not_to_unpack_stays_a_file_whatever_its_type() {
    let m = manifest(vec![layer(
        D1,
        DIRECTORY_MEDIA_TYPE,
        &[(TITLE, "out.tar.gz"), (UNPACK, "false")],
    )]);
    assert!(matches!(
        &plan_pull(&m, true).unwrap()[0],
        LayerAction::File { path, .. } if path == Path::new("out.tar.gz")
    ));
}

#[test]
fn with_unpacking_off_a_directory_layer_is_kept_as_its_tar_gz() {
    let m = manifest(vec![layer(
        D1,
        DIRECTORY_MEDIA_TYPE,
        &[(TITLE, "out"), (UNPACK, "true")],
    )]);
    assert!(matches!(
        &plan_pull(&m, false).unwrap()[0],
        LayerAction::File { path, .. } if path == Path::new("out.tar.gz")
    ));
}

#[test]
fn a_directory_titled_dot_unpacks_into_the_output_directory_itself() {
    let m = manifest(vec![layer(
        D1,
        DIRECTORY_MEDIA_TYPE,
        &[(TITLE, "."), (UNPACK, "true")],
    )]);
    assert_eq!(plan_pull(&m, true).unwrap()[0].path(), Path::new(""));
    let file = manifest(vec![layer(D1, FILE_MEDIA_TYPE, &[(TITLE, ".")])]);
    assert!(matches!(
        plan_pull(&file, true),
        Err(LayoutError::UnsafeTitle {
            why: "which names no file",
            ..
        })
    ));
}

#[test]
fn titles_that_leave_the_output_directory_are_refused() {
    for (title, why) in [
        ("../x", "which climbs out with `..`"),
        ("a/../../x", "which climbs out with `..`"),
        ("/etc/passwd", "which is absolute"),
        ("", "empty"),
        ("a\0b", "which contains a NUL byte"),
    ] {
        let m = manifest(vec![layer(D1, FILE_MEDIA_TYPE, &[(TITLE, title)])]);
        let err = plan_pull(&m, true).unwrap_err();
        assert_eq!(
            err,
            LayoutError::UnsafeTitle {
                digest: D1.into(),
                title: title.into(),
                why
            },
            "{title:?}"
        );
        assert!(err.to_string().contains(D1), "{err}");
    }
}

#[test]
fn untitled_duplicate_and_nested_layers_are_refused() {
    let untitled = manifest(vec![layer(D1, FILE_MEDIA_TYPE, &[])]);
    assert_eq!(
        plan_pull(&untitled, true),
        Err(LayoutError::Untitled { digest: D1.into() })
    );
    let twice = manifest(vec![
        layer(D1, FILE_MEDIA_TYPE, &[(TITLE, "a")]),
        layer(D2, FILE_MEDIA_TYPE, &[(TITLE, "./a")]),
    ]);
    assert_eq!(
        plan_pull(&twice, true),
        Err(LayoutError::DuplicateTitle("./a".into()))
    );
    let nested = manifest(vec![
        layer(
            D1,
            DIRECTORY_MEDIA_TYPE,
            &[(TITLE, "out"), (UNPACK, "true")],
        ),
        layer(D2, FILE_MEDIA_TYPE, &[(TITLE, "out/extra.txt")]),
    ]);
    assert!(matches!(
        plan_pull(&nested, true),
        Err(LayoutError::NestedTitle { .. })
    ));
    assert_eq!(
        plan_pull(&manifest(vec![]), true),
        Err(LayoutError::NoLayers)
    );
}

#[test]
fn the_manifest_is_what_oras_push_writes() {
    let layers = [
        PushedLayer::file("a.txt", D1.into(), 3),
        PushedLayer::directory("out", true, D2.into(), 7, D1.into()),
    ];
    let json: serde_json::Value = serde_json::from_slice(
        &manifest_json(&layers, DEFAULT_ARTIFACT_TYPE, "2026-11-23T10:00:00Z").unwrap(),
    )
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": "application/vnd.unknown.artifact.v1",
            "config": {
                "mediaType": "application/vnd.oci.empty.v1+json",
                "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
                "size": 2,
                "data": "e30="
            },
            "layers": [
                {"mediaType": FILE_MEDIA_TYPE, "digest": D1, "size": 3,
                 "annotations": {TITLE: "a.txt"}},
                {"mediaType": DIRECTORY_MEDIA_TYPE, "digest": D2, "size": 7,
                 "annotations": {TITLE: "out", UNPACK: "true", TAR_DIGEST: D1}}
            ],
            "annotations": {CREATED: "2026-11-23T10:00:00Z"}
        })
    );
}

#[test]
fn a_directory_kept_packed_is_titled_as_its_archive() {
    let layer = PushedLayer::directory("out", false, D2.into(), 7, D1.into());
    assert_eq!(layer.annotations[TITLE], "out.tar.gz");
    assert_eq!(layer.annotations[UNPACK], "false");
    assert!(!layer.annotations.contains_key(TAR_DIGEST));
}
