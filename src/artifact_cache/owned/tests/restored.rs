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
        true,
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
            restored("its Deployment", "oras-registry", before, &after, false),
            None
        );
    }
}
