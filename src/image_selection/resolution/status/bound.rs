//! The status's size bound: etcd refuses an object over its request limit, and a refused status
//! is never written (the old one would be served forever). The classes and `classKeys` are cut to
//! fit [`MAX_CLASSES_BYTES`]. `classKeys` cannot be cut in part (the webhook groups nodes by all
//! of them): over [`MAX_CLASS_KEYS_BYTES`] it is left out, with every class. Then each reason is
//! cut to [`MAX_REASON_BYTES`], then reasons and set descriptions go, last the classes
//! beyond the bound; a class left out denies its pods as not ready, and a `Truncated` condition
//! says what was cut. A policy ocifit took charge of for a pod's `image-ref` gets a few classes'
//! worth ([`StatusLimits::MANAGED`]).

use crate::api::{ClassStatus, ImageSelectionPolicyStatus};

/// The most one class's reason keeps.
pub(super) const MAX_REASON_BYTES: usize = 1024;
/// The most the classes and `classKeys` take in the status together, as JSON.
pub(super) const MAX_CLASSES_BYTES: usize = 1024 * 1024;
/// The most `classKeys` takes, as JSON.
pub(super) const MAX_CLASS_KEYS_BYTES: usize = 256 * 1024;

/// How much of a status the classes and `classKeys` may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusLimits {
    /// The classes and `classKeys` together, as JSON.
    pub classes_bytes: usize,
    /// `classKeys` alone, as JSON.
    pub class_keys_bytes: usize,
}

impl StatusLimits {
    /// A policy an admin wrote: what etcd stores, with room for the rest.
    pub const WRITTEN: StatusLimits = StatusLimits {
        classes_bytes: MAX_CLASSES_BYTES,
        class_keys_bytes: MAX_CLASS_KEYS_BYTES,
    };
    /// A policy ocifit took charge of: a few classes' worth, whatever the artifact says.
    pub const MANAGED: StatusLimits = StatusLimits {
        classes_bytes: 16 * 1024,
        class_keys_bytes: 2 * 1024,
    };
}

/// Cuts the classes and `classKeys` of `status` to `limits`; what was cut, if anything, for the
/// `Truncated` condition.
pub(super) fn status(
    status: &mut ImageSelectionPolicyStatus,
    limits: StatusLimits,
) -> Option<String> {
    let keys = status.class_keys.as_ref().map_or(0, |keys| {
        serde_json::to_vec(keys).map_or(usize::MAX, |json| json.len())
    });
    if keys > limits.class_keys_bytes {
        status.class_keys = None;
        let left_out = status.classes.len();
        status.classes.clear();
        return Some(format!(
            "the status would exceed its bound: classKeys (the labels and features the \
             artifact's rules read, {keys} bytes) is over its limit of {} bytes, so it is \
             left out, and with it all {left_out} classes (their pods are denied as not ready)",
            limits.class_keys_bytes
        ));
    }
    classes(
        &mut status.classes,
        limits.classes_bytes.saturating_sub(keys),
        limits.classes_bytes,
    )
}

/// Cuts `classes` to `bound` bytes of JSON (and each reason to [`MAX_REASON_BYTES`]), `whole`
/// less what `classKeys` takes; what was cut, if anything.
fn classes(classes: &mut Vec<ClassStatus>, bound: usize, whole: usize) -> Option<String> {
    let mut cut = Vec::new();
    let mut long = 0;
    for reason in classes.iter_mut().filter_map(|class| class.reason.as_mut()) {
        if clip(reason, MAX_REASON_BYTES) {
            long += 1;
        }
    }
    if long > 0 {
        cut.push(format!(
            "the reasons of {long} classes cut to {MAX_REASON_BYTES} bytes"
        ));
    }
    if size(classes) > bound {
        for class in classes.iter_mut() {
            class.reason = None;
            if let Some(matched) = class.matched.as_mut() {
                matched.description = None;
            }
        }
        cut.push("every class's reason and set description left out".to_owned());
    }
    if size(classes) > bound {
        let total = classes.len();
        let mut used = 2; // the brackets of the list
        let kept = classes
            .iter()
            .take_while(|class| {
                used += size(std::slice::from_ref(*class)) - 1;
                used <= bound
            })
            .count();
        classes.truncate(kept);
        cut.push(format!(
            "{} of {total} classes left out (their pods are denied as not ready)",
            total - kept
        ));
    }
    (!cut.is_empty()).then(|| {
        format!(
            "the status would exceed its bound: {} (classes bounded to {bound} bytes, {whole} \
             less what classKeys takes)",
            cut.join("; ")
        )
    })
}

/// Cuts `text` to at most `limit` bytes (on a character boundary, marked); whether it was cut.
fn clip(text: &mut String, limit: usize) -> bool {
    if text.len() <= limit {
        return false;
    }
    const MARK: &str = " …(cut)";
    let mut end = limit - MARK.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(MARK);
    true
}

fn size(classes: &[ClassStatus]) -> usize {
    serde_json::to_vec(classes).map_or(usize::MAX, |json| json.len())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::ClassMatch;

    fn class(name: usize, reason_bytes: usize, labels: usize) -> ClassStatus {
        ClassStatus {
            name: format!("c-{name:08}"),
            labels: (0..labels)
                .map(|i| (format!("key-{i:04}"), "v".repeat(40)))
                .collect::<BTreeMap<_, _>>(),
            nodes: 1,
            image: Some("registry.local/app:v1".into()),
            matched: Some(ClassMatch {
                index: 0,
                tag: "registry.local/app:v1".into(),
                weight: 0,
                description: Some("d".repeat(200)),
            }),
            reason: Some("é".repeat(reason_bytes / 2)),
        }
    }

    #[test]
    fn small_classes_are_left_as_they_are() {
        let mut classes = vec![class(0, 100, 2), class(1, 100, 2)];
        let before = classes.clone();
        assert_eq!(
            super::classes(&mut classes, MAX_CLASSES_BYTES, MAX_CLASSES_BYTES),
            None
        );
        assert_eq!(classes, before);
    }

    #[test]
    fn long_reasons_are_cut_on_a_character_boundary_and_said() {
        let mut classes = vec![class(0, 10_000, 2), class(1, 100, 2)];
        let said = super::classes(&mut classes, MAX_CLASSES_BYTES, MAX_CLASSES_BYTES).unwrap();
        let reason = classes[0].reason.as_deref().unwrap();
        assert!(reason.len() <= MAX_REASON_BYTES && reason.ends_with("…(cut)"));
        assert_eq!(classes[1].reason.as_deref().unwrap().len(), 100);
        assert!(
            said.contains("the reasons of 1 classes cut to 1024 bytes"),
            "{said}"
        );
    }

    #[test]
    fn many_classes_lose_reasons_then_rows_and_stay_under_the_bound() {
        // 5,000 kinds of node with reasons of a large artifact: far over the bound.
        let mut classes: Vec<_> = (0..5_000).map(|i| class(i, 1_000, 4)).collect();
        let said = super::classes(&mut classes, MAX_CLASSES_BYTES, MAX_CLASSES_BYTES).unwrap();
        assert!(size(&classes) <= MAX_CLASSES_BYTES);
        assert!(classes.iter().all(|c| c.reason.is_none()));
        assert!(said.contains("every class's reason and set description left out"));
        let kept = classes.len();
        assert!(kept > 1_000 && kept < 5_000, "{kept}");
        assert!(
            said.contains(&format!("{} of 5000 classes left out", 5_000 - kept)),
            "{said}"
        );
    }

    /// A status with `classes` and `labels` class keys of 100 bytes each.
    fn status_with(classes: Vec<ClassStatus>, labels: usize) -> ImageSelectionPolicyStatus {
        ImageSelectionPolicyStatus {
            class_keys: Some(crate::engine::Reads {
                labels: (0..labels)
                    .map(|i| format!("example.com/{i:08}-{}", "k".repeat(79)))
                    .collect(),
                ..Default::default()
            }),
            class_count: i32::try_from(classes.len()).unwrap(),
            classes,
            ..ImageSelectionPolicyStatus::default()
        }
    }

    #[test]
    fn class_keys_over_their_bound_are_left_out_with_every_class_and_said() {
        // 10,000 label keys of 100 bytes: within the engine's limits, over the keys' bound.
        let mut status = status_with(vec![class(0, 100, 2), class(1, 100, 2)], 10_000);
        let said = super::status(&mut status, StatusLimits::WRITTEN).unwrap();
        assert_eq!(status.class_keys, None);
        assert!(status.classes.is_empty());
        assert_eq!(status.class_count, 2, "the count says how many are missing");
        assert!(
            said.contains("classKeys") && said.contains("over its limit of 262144 bytes"),
            "{said}"
        );
        assert!(said.contains("all 2 classes"), "{said}");
    }

    #[test]
    fn class_keys_under_their_bound_are_kept_and_the_classes_take_what_is_left() {
        // 2,000 keys and classes that alone would fit the whole bound.
        let mut status = status_with((0..600).map(|i| class(i, 900, 4)).collect(), 2_000);
        let keys = serde_json::to_vec(&status.class_keys).unwrap().len();
        assert!(size(&status.classes) < MAX_CLASSES_BYTES);
        assert!(size(&status.classes) + keys > MAX_CLASSES_BYTES);
        let said = super::status(&mut status, StatusLimits::WRITTEN).unwrap();
        assert!(status.class_keys.is_some());
        assert!(size(&status.classes) + keys <= MAX_CLASSES_BYTES);
        assert!(
            said.contains("every class's reason and set description left out"),
            "{said}"
        );
        assert!(said.contains("less what classKeys takes"), "{said}");
        let mut small = status_with(vec![class(0, 100, 2)], 10);
        assert_eq!(super::status(&mut small, StatusLimits::WRITTEN), None);
    }

    #[test]
    fn a_managed_policy_keeps_a_few_classes_and_no_large_class_keys() {
        // 600 classes and 100 keys of 100 bytes: fits an admin's policy whole.
        let written = || status_with((0..600).map(|i| class(i, 100, 2)).collect(), 10);
        let mut whole = written();
        assert_eq!(super::status(&mut whole, StatusLimits::WRITTEN), None);
        let mut managed = written();
        let said = super::status(&mut managed, StatusLimits::MANAGED).unwrap();
        let keys = serde_json::to_vec(&managed.class_keys).unwrap().len();
        assert!(size(&managed.classes) + keys <= StatusLimits::MANAGED.classes_bytes);
        assert!(!managed.classes.is_empty() && managed.classes.len() < 100);
        assert!(said.contains("classes left out"), "{said}");
        let mut keyed = status_with(vec![class(0, 100, 2)], 100);
        assert!(super::status(&mut keyed.clone(), StatusLimits::WRITTEN).is_none());
        let said = super::status(&mut keyed, StatusLimits::MANAGED).unwrap();
        assert_eq!(keyed.class_keys, None);
        assert!(said.contains("over its limit of 2048 bytes"), "{said}");
    }
}
