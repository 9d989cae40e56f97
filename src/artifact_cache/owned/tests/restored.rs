use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::super::*;

fn deployment(replicas: i32, label: &str) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("oras-registry".into()),
            labels: Some([("app.kubernetes.io/name".to_owned(), label.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

fn restored_deployment(before: Option<&Deployment>, after: &Deployment) -> Option<Restored> {
    let before = before.map(ours);
    restored(
        "its Deployment",
        "oras-registry",
        before.as_ref(),
        &ours(after),
        (true, None),
    )
}

fn restore(action: &'static str, note: &str) -> Option<Restored> {
    Some(Restored {
        action,
        note: note.to_owned(),
    })
}

#[test]
fn a_deleted_object_created_again_says_so() {
    assert_eq!(
        restored_deployment(None, &deployment(1, "artifact-cache")),
        restore(
            "Recreate",
            "its Deployment oras-registry was deleted; created again"
        )
    );
}

#[test]
fn an_object_created_again_before_the_watch_saw_its_deletion_says_so() {
    let mut deleted = deployment(1, "artifact-cache");
    deleted.metadata.uid = Some("first".into());
    let mut created = deleted.clone();
    created.metadata.uid = Some("second".into());
    assert_eq!(
        restored_deployment(Some(&deleted), &created),
        restore(
            "Recreate",
            "its Deployment oras-registry was deleted; created again"
        )
    );
    assert_eq!(restored_deployment(Some(&created), &created), None);
}

#[test]
fn an_object_this_controller_created_that_the_watch_has_not_seen_yet_is_no_news() {
    let mut created = deployment(1, "artifact-cache");
    created.metadata.uid = Some("first".into());
    let last = ours(&created);
    let applied = (true, Some(&last));
    assert_eq!(
        restored(
            "its Deployment",
            "oras-registry",
            None,
            &ours(&created),
            applied
        ),
        None
    );
    let mut again = deployment(1, "artifact-cache");
    again.metadata.uid = Some("second".into());
    assert_eq!(
        restored(
            "its Deployment",
            "oras-registry",
            None,
            &ours(&again),
            applied
        ),
        restore(
            "Recreate",
            "its Deployment oras-registry was deleted; created again"
        )
    );
}

#[test]
fn a_spec_change_the_watch_never_showed_is_told_by_the_generation() {
    let mut applied = deployment(1, "artifact-cache");
    applied.metadata.uid = Some("first".into());
    applied.metadata.generation = Some(1);
    let last = ours(&applied);
    let mut put_back = applied.clone();
    put_back.metadata.generation = Some(3);
    let watch_saw = ours(&applied);
    assert_eq!(
        restored(
            "its Deployment",
            "oras-registry",
            Some(&watch_saw),
            &ours(&put_back),
            (true, Some(&last))
        ),
        restore(
            "Restore",
            "its Deployment oras-registry was changed (spec); put back as the cache asks"
        )
    );
    assert_eq!(
        restored(
            "its Deployment",
            "oras-registry",
            Some(&watch_saw),
            &ours(&applied),
            (true, Some(&last))
        ),
        None,
        "an apply that moved nothing is no news"
    );
}

#[test]
fn a_changed_spec_or_label_put_back_names_what_changed() {
    let ours = deployment(1, "artifact-cache");
    assert_eq!(
        restored_deployment(Some(&deployment(0, "artifact-cache")), &ours),
        restore(
            "Restore",
            "its Deployment oras-registry was changed (spec); put back as the cache asks"
        )
    );
    assert_eq!(
        restored_deployment(Some(&deployment(0, "someone")), &ours),
        restore(
            "Restore",
            "its Deployment oras-registry was changed (spec, labels); put back as the cache asks"
        )
    );
}

#[test]
fn an_apply_that_changed_nothing_but_status_is_no_news() {
    let before = deployment(1, "artifact-cache");
    let mut after = before.clone();
    after.status = Some(DeploymentStatus {
        ready_replicas: Some(1),
        ..DeploymentStatus::default()
    });
    after.metadata.resource_version = Some("42".into());
    assert_eq!(restored_deployment(Some(&before), &after), None);
}

#[test]
fn a_first_creation_or_a_new_spec_is_not_a_put_back() {
    let after = ours(&deployment(1, "artifact-cache"));
    let before = ours(&deployment(0, "artifact-cache"));
    for before in [None, Some(&before)] {
        assert_eq!(
            restored(
                "its Deployment",
                "oras-registry",
                before,
                &after,
                (false, None)
            ),
            None
        );
    }
}
