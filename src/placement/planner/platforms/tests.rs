use proptest::prelude::*;

use super::*;
use crate::placement::fixtures::{platform, platforms};

/// A node of exactly this platform, its variant known.
fn node(text: &str) -> NodePlatform {
    NodePlatform::exactly(&platform(text).normalized())
}

fn shared(containers: &[(&str, &[&str])]) -> Result<String, String> {
    let owned: Vec<(&str, Vec<Platform>)> = containers
        .iter()
        .map(|(name, texts)| (*name, platforms(texts)))
        .collect();
    let images: Vec<ContainerImage<'_>> = owned
        .iter()
        .map(|(name, platforms)| ContainerImage { name, platforms })
        .collect();
    intersect(&images)
        .map(|common| common.to_string())
        .map_err(|disagreement| disagreement.to_string())
}

#[test]
fn three_images_share_only_what_all_three_offer() {
    // archaware-controller intersected pairwise and got this wrong for three images.
    let result = shared(&[
        ("web", &["linux/amd64", "linux/arm64", "linux/s390x"]),
        ("proxy", &["linux/amd64", "linux/arm64"]),
        ("metrics", &["linux/arm64", "linux/s390x"]),
    ]);
    assert_eq!(result.unwrap(), "linux/arm64");
}

#[test]
fn an_arm64_only_sidecar_narrows_a_multi_platform_main_container() {
    let result = shared(&[
        ("web", &["linux/amd64", "linux/arm64/v8"]),
        ("metrics", &["linux/arm64"]),
    ]);
    assert_eq!(result.unwrap(), "linux/arm64");
}

#[test]
fn the_variant_needed_is_the_highest_of_each_containers_lowest() {
    let result = shared(&[
        ("a", &["linux/arm/v6", "linux/arm/v7"]),
        ("b", &["linux/arm/v7"]),
        ("c", &["linux/arm/v5", "linux/amd64"]),
    ]);
    assert_eq!(result.unwrap(), "linux/arm/v7");
}

#[test]
fn disagreeing_containers_are_each_named_with_what_they_offer() {
    let message = shared(&[
        ("web", &["linux/amd64", "linux/arm64"]),
        ("legacy", &["linux/s390x"]),
        ("empty", &[]),
    ])
    .unwrap_err();
    assert_eq!(
        message,
        "no platform suits every container: web runs on linux/amd64, linux/arm64; \
         legacy runs on linux/s390x; empty runs on no platform"
    );
}

#[test]
fn duplicate_entries_and_spellings_count_once() {
    let result = shared(&[("web", &["linux/aarch64", "linux/arm64", "linux/arm64/v8"])]);
    assert_eq!(result.unwrap(), "linux/arm64");
}

const OSES: [&str; 2] = ["linux", "windows"];
const ARCHES: [(&str, &[&str]); 3] = [
    ("amd64", &["", "v2", "v3"]),
    ("arm", &["v5", "v6", "v7"]),
    ("arm64", &["", "v9"]),
];

fn arb_platform() -> impl Strategy<Value = String> {
    (0..OSES.len(), 0..ARCHES.len(), 0..3usize).prop_map(|(os, arch, variant)| {
        let (arch, variants) = ARCHES[arch];
        let variant = variants[variant % variants.len()];
        if variant.is_empty() {
            format!("{}/{arch}", OSES[os])
        } else {
            format!("{}/{arch}/{variant}", OSES[os])
        }
    })
}

/// Every node platform of the generated alphabet.
fn nodes() -> Vec<NodePlatform> {
    let mut nodes = Vec::new();
    for os in OSES {
        for (arch, variants) in ARCHES {
            for variant in variants.iter() {
                let text = if variant.is_empty() {
                    format!("{os}/{arch}")
                } else {
                    format!("{os}/{arch}/{variant}")
                };
                nodes.push(node(&text));
            }
        }
    }
    nodes
}

proptest! {
    #[test]
    fn a_node_is_allowed_exactly_when_every_container_runs_on_it(
        containers in proptest::collection::vec(proptest::collection::vec(arb_platform(), 0..5), 1..6)
    ) {
        let owned: Vec<(String, Vec<Platform>)> = containers
            .iter()
            .enumerate()
            .map(|(i, texts)| (format!("c{i}"), texts.iter().map(|t| platform(t)).collect()))
            .collect();
        let images: Vec<ContainerImage<'_>> = owned
            .iter()
            .map(|(name, platforms)| ContainerImage { name, platforms })
            .collect();
        let result = intersect(&images);
        for node in nodes() {
            let every_container_runs = owned.iter().all(|(_, platforms)| {
                platforms.iter().any(|p| p.runs_on(&node))
            });
            let allowed = result.as_ref().is_ok_and(|common| common.allows(&node));
            prop_assert_eq!(allowed, every_container_runs, "{}", node);
        }
        // The answer does not depend on the containers' order.
        let mut reversed = images.clone();
        reversed.reverse();
        prop_assert_eq!(
            intersect(&reversed).ok(),
            result.as_ref().ok().cloned()
        );
        if let Err(disagreement) = &result {
            prop_assert_eq!(disagreement.offers.len(), owned.len());
        }
    }
}
