//! `ocifit resolve` and the controller's status give the same image per class: for generated
//! artifacts (both modes), nodes and image platforms, the report the CLI prints and the status
//! the controller computes agree class by class.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::inputs::Loaded;
use super::report::Report;
use crate::api::ImageSelectionPolicySpec;
use crate::engine::{Artifact, Format, NodeInputs};
use crate::image_selection::{ArtifactState, StatusInputs, StatusLimits, policy_status};
use crate::image_selection::{
    AttachedArtifact, CandidateArtifact, Content, PlatformLookup, Platforms, Resolved,
};
use crate::platform::Platform;
use crate::registry::{self, ResolveError};

const IMAGES: [&str; 4] = ["img0:1", "img1:1", "img2:1", "img3:1"];
const ARCHES: [&str; 2] = ["amd64", "arm64"];

/// One expression of an ocifit rule over the generated label keys.
fn expression() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec!["flavor", "zone"]);
    let values = prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "x"]), 1..3);
    let op = prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist"]);
    (key, op, values).prop_map(|(key, op, values)| match op {
        "Exists" | "DoesNotExist" => json!({"key": key, "op": op}),
        _ => json!({"key": key, "op": op, "value": values}),
    })
}

/// An ocifit artifact: 1–4 sets, each with an image, a weight and 0–2 expressions.
fn artifact() -> impl Strategy<Value = Artifact> {
    let set = (
        prop::sample::select(IMAGES.to_vec()),
        0..3i32,
        prop::collection::vec(expression(), 0..3),
    )
        .prop_map(|(tag, weight, expressions)| {
            let rules = if expressions.is_empty() {
                json!([])
            } else {
                json!([{"matchFeatures": [{"matchExpressions": expressions}]}])
            };
            json!({"tag": tag, "weight": weight, "rules": rules})
        });
    prop::collection::vec(set, 1..5).prop_map(|sets| {
        let document = json!({"version": "v1alpha1", "compatibilities": sets});
        Artifact::parse(Format::Ocifit, document.to_string().as_bytes())
            .expect("a generated artifact parses")
    })
}

/// Nodes with a flavor, a zone (sometimes absent) and an architecture.
fn nodes() -> impl Strategy<Value = Vec<(String, NodeInputs)>> {
    let node = (
        prop::sample::select(vec!["a", "b", "c"]),
        prop::option::of(prop::sample::select(vec!["x", "y"])),
        prop::sample::select(ARCHES.to_vec()),
    );
    prop::collection::vec(node, 1..12).prop_map(|nodes| {
        nodes
            .into_iter()
            .enumerate()
            .map(|(at, (flavor, zone, arch))| {
                let mut labels = BTreeMap::from([
                    ("flavor".to_owned(), flavor.to_owned()),
                    ("kubernetes.io/arch".to_owned(), arch.to_owned()),
                    ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                ]);
                if let Some(zone) = zone {
                    labels.insert("zone".to_owned(), zone.to_owned());
                }
                (format!("n{at}"), NodeInputs::new(labels))
            })
            .collect()
    })
}

/// For each image: the architectures it is built for, unreadable, or not checked.
fn platforms() -> impl Strategy<Value = Platforms> {
    let lookup = prop_oneof![
        prop::sample::subsequence(ARCHES.to_vec(), 0..=2).prop_map(|arches| {
            PlatformLookup::Known(
                arches
                    .into_iter()
                    .map(|arch| Platform {
                        os: "linux".into(),
                        architecture: arch.into(),
                        variant: None,
                        os_version: None,
                    })
                    .collect(),
            )
        }),
        Just(PlatformLookup::Failed("manifest unknown".into())),
        Just(PlatformLookup::NotChecked("--offline".into())),
    ];
    prop::collection::vec(lookup, IMAGES.len()).prop_map(|lookups| {
        IMAGES
            .iter()
            .map(|image| (*image).to_owned())
            .zip(lookups)
            .collect()
    })
}

/// What the registry answers for an image with no NFD artifact attached.
fn no_artifact() -> ResolveError {
    ResolveError::Registry(registry::Error::NotFound {
        target: registry::Target {
            registry: "registry.example.com".to_owned(),
            repository: "app".to_owned(),
            reference: "v1".to_owned(),
        },
        what: "NFD compatibility artifact referring to the image",
    })
}

/// `ref` mode, or the artifact's sets as candidates (each image's own artifact, some missing).
fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        artifact().prop_map(Content::Sets),
        prop::collection::vec((prop::option::of(artifact()), 0..3i32), 1..4).prop_map(
            |candidates| {
                Content::Candidates(
                    candidates
                        .into_iter()
                        .enumerate()
                        .map(|(at, (artifact, weight))| CandidateArtifact {
                            image: IMAGES[at % IMAGES.len()].to_owned(),
                            weight,
                            artifact: artifact
                                .map(|artifact| AttachedArtifact {
                                    digest: format!("sha256:{at}"),
                                    artifact,
                                })
                                .ok_or_else(no_artifact),
                        })
                        .collect(),
                )
            }
        ),
    ]
}

fn spec(selector: &BTreeMap<String, String>) -> ImageSelectionPolicySpec {
    serde_json::from_value(json!({
        "artifact": {"ref": "registry.example/app-compat:v1"},
        "targetImage": "placeholder:latest",
        "nodeSelector": selector,
    }))
    .expect("a spec")
}

proptest! {
    #[test]
    fn resolve_prints_the_image_the_status_holds_for_every_class(
        content in content(),
        nodes in nodes(),
        platforms in platforms(),
        zoned in any::<bool>(),
    ) {
        let selector: BTreeMap<String, String> = if zoned {
            BTreeMap::from([("zone".to_owned(), "x".to_owned())])
        } else {
            BTreeMap::new()
        };
        let resolved = Resolved {
            digest: "sha256:generated".into(),
            format: Format::Ocifit,
            content,
        };
        let spec = spec(&selector);
        let now = Time(Timestamp::UNIX_EPOCH);
        let status = policy_status(&StatusInputs {
            generation: Some(1),
            spec: &spec,
            artifact: ArtifactState::Current(&resolved),
            nodes: &nodes,
            platforms: &platforms,
            previous: None,
            now: &now,
            limits: StatusLimits::WRITTEN,
        })
        .status;
        let loaded = Loaded {
            resolved,
            registry: None,
            source: "generated".into(),
            digest: None,
            format_detected: None,
        };
        let report: Value = serde_json::from_str(
            &crate::cli::Output::Json
                .render(&Report::new(&loaded, None, &selector, &nodes, &platforms), Report::table)
                .unwrap(),
        )
        .expect("the report is JSON");
        let printed: BTreeMap<String, Value> = report["classes"]
            .as_array()
            .expect("classes")
            .iter()
            .map(|class| (class["name"].as_str().unwrap_or_default().to_owned(), class["image"].clone()))
            .collect();
        let stored: BTreeMap<String, Value> = status
            .classes
            .iter()
            .map(|row| (row.name.clone(), json!(row.image)))
            .collect();
        prop_assert_eq!(printed, stored);
    }
}
