//! Placements are remembered by a fixed-size digest, never by a copy of the pod's selector and
//! affinity (which a pod author makes as large as the request allows).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;

use crate::image_selection::planner::request::placement_key;

fn with_selector(entries: usize, value: &str) -> PodSpec {
    PodSpec {
        node_selector: Some(
            (0..entries)
                .map(|i| (format!("key-{i}"), value.to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..PodSpec::default()
    }
}

#[test]
fn a_placement_key_is_32_bytes_whatever_the_selectors_size() {
    let small = placement_key(&with_selector(1, "a")).unwrap();
    let large = placement_key(&with_selector(20_000, &"v".repeat(50))).unwrap();
    assert_eq!(std::mem::size_of_val(&large), 32);
    assert_ne!(small, large);
    assert_eq!(
        placement_key(&with_selector(20_000, &"v".repeat(50))),
        Some(large),
        "equal placements share an entry"
    );
    assert_ne!(
        placement_key(&with_selector(1, "b")),
        Some(small),
        "different values do not"
    );
}
