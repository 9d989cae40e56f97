use serde_json::json;

use super::*;
use crate::webhook::planner::tests::fixtures::{index, policy, request, resolved, simple_pod};

fn notice_for(pod: &Pod, on_unpinned: &str, dry_run: bool) -> Option<Notice> {
    let index = index(&[resolved(policy("app", json!({"onUnpinned": on_unpinned})))]);
    let request = request(pod, dry_run);
    notice(&index, &request, &index.plan(&request))
}

#[test]
fn a_denial_is_noticed_on_its_policy_naming_a_generate_name_pod() {
    let pod = simple_pod(
        json!({"name": null, "generateName": "web-5d8f-"}),
        json!({}),
    );
    let notice = notice_for(&pod, "Deny", false).unwrap();
    assert_eq!(notice.policy.name.as_deref(), Some("app"));
    assert_eq!(notice.policy.kind.as_deref(), Some("ImageSelectionPolicy"));
    assert!(notice.warning);
    assert_eq!(notice.reason, "Unpinned");
    assert!(
        notice
            .note
            .starts_with("denied pod default/web-5d8f-* (generateName): "),
        "{}",
        notice.note
    );
}

#[test]
fn a_pin_is_a_normal_notice_and_a_plain_selection_none() {
    let pinned = notice_for(&simple_pod(json!({}), json!({})), "Pin", false).unwrap();
    assert!(!pinned.warning);
    assert_eq!(pinned.reason, "ImagePinned");
    assert!(
        pinned.note.starts_with("pinned pod default/p: "),
        "{}",
        pinned.note
    );
    let selected = simple_pod(json!({}), json!({"nodeSelector": {"flavor": "vanilla"}}));
    assert_eq!(notice_for(&selected, "Pin", false), None);
}

#[test]
fn dry_runs_are_never_noticed() {
    assert_eq!(
        notice_for(&simple_pod(json!({}), json!({})), "Deny", true),
        None
    );
    assert_eq!(
        notice_for(&simple_pod(json!({}), json!({})), "Pin", true),
        None
    );
}

#[test]
fn one_event_per_policy_and_reason_per_window_counting_the_rest() {
    let notice = notice_for(&simple_pod(json!({}), json!({})), "Deny", false).unwrap();
    let other = Notice {
        reason: "NoMatch",
        ..notice.clone()
    };
    let mut throttle = Throttle::default();
    let t0 = Instant::now();
    assert_eq!(throttle.allow(&notice, t0), Some(0));
    assert_eq!(throttle.allow(&notice, t0 + Duration::from_secs(1)), None);
    assert_eq!(throttle.allow(&notice, t0 + Duration::from_secs(59)), None);
    assert_eq!(throttle.allow(&other, t0 + Duration::from_secs(2)), Some(0));
    assert_eq!(throttle.allow(&notice, t0 + WINDOW), Some(2));
    assert_eq!(
        throttle.allow(&notice, t0 + WINDOW + Duration::from_secs(1)),
        None
    );
}

#[test]
fn long_notes_are_capped_at_a_kilobyte_on_a_character_boundary() {
    let note = cap("é".repeat(1000));
    assert!(note.len() <= MAX_NOTE);
    assert!(note.ends_with("..."));
}
