use serde_json::json;

use super::super::*;
use crate::image_selection::planner::tests::fixtures::{
    index, policy, request, resolved, simple_pod,
};

fn notice_for(pod: &Pod, on_unpinned: &str) -> Option<Notice> {
    let index = index(&[resolved(policy("app", json!({"onUnpinned": on_unpinned})))]);
    let request = request(pod, false);
    notice(&request, &index.plan(&request))
}

#[test]
fn a_denial_is_noticed_on_its_policy_naming_a_generate_name_pod() {
    let pod = simple_pod(
        json!({"name": null, "generateName": "web-5d8f-"}),
        json!({}),
    );
    let notice = notice_for(&pod, "Deny").unwrap();
    assert_eq!(notice.on.name.as_deref(), Some("app"));
    assert_eq!(notice.on.kind.as_deref(), Some("ImageSelectionPolicy"));
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
    let pinned = notice_for(&simple_pod(json!({}), json!({})), "Pin").unwrap();
    assert!(!pinned.warning);
    assert_eq!(pinned.reason, "ImagePinned");
    assert!(
        pinned.note.starts_with("pinned pod default/p: "),
        "{}",
        pinned.note
    );
    let selected = simple_pod(json!({}), json!({"nodeSelector": {"flavor": "vanilla"}}));
    assert_eq!(notice_for(&selected, "Pin"), None);
}
