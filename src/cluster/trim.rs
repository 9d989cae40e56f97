//! What a watch keeps of a watched object's metadata: its identity, versions and times, and the
//! labels a feature reads, never the annotations, owners, finalizers, managed fields or other
//! labels anyone writing the object can pile on. Features trim their kinds' specs themselves;
//! this is the one metadata trim their watches share. Pure.

use kube::core::ObjectMeta;

/// Keeps of `meta` the name, namespace, uid, resourceVersion, generation, creation and
/// deletion times, and the labels whose keys start with one of `labels` (a map the object has
/// stays, maybe emptied).
pub fn identity_and_labels(meta: &mut ObjectMeta, labels: &[&str]) {
    let whole = std::mem::take(meta);
    *meta = ObjectMeta {
        name: whole.name,
        namespace: whole.namespace,
        uid: whole.uid,
        resource_version: whole.resource_version,
        generation: whole.generation,
        creation_timestamp: whole.creation_timestamp,
        deletion_timestamp: whole.deletion_timestamp,
        labels: whole.labels.map(|mut map| {
            map.retain(|key, _| labels.iter().any(|prefix| key.starts_with(prefix)));
            map
        }),
        ..ObjectMeta::default()
    };
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, OwnerReference, Time,
    };
    use serde_json::json;

    use super::*;

    #[test]
    fn identity_versions_times_and_the_labels_read_are_kept_and_nothing_else() {
        let pile = "x".repeat(64 * 1024);
        let time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let mut meta = ObjectMeta {
            name: Some("p".into()),
            namespace: Some("n".into()),
            uid: Some("u".into()),
            resource_version: Some("3".into()),
            generation: Some(2),
            creation_timestamp: Some(time.clone()),
            deletion_timestamp: Some(time),
            generate_name: Some(pile.clone()),
            labels: Some(BTreeMap::from([
                ("selection.ocifit.io/managed".to_owned(), "true".to_owned()),
                ("app".to_owned(), pile.clone()),
            ])),
            annotations: Some(BTreeMap::from([("a".to_owned(), pile.clone())])),
            finalizers: Some(vec![pile.clone()]),
            owner_references: Some(vec![OwnerReference {
                name: pile.clone(),
                ..OwnerReference::default()
            }]),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some(pile),
                ..ManagedFieldsEntry::default()
            }]),
            ..ObjectMeta::default()
        };
        identity_and_labels(&mut meta, &["selection.ocifit.io/"]);
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({
                "name": "p",
                "namespace": "n",
                "uid": "u",
                "resourceVersion": "3",
                "generation": 2,
                "creationTimestamp": "1970-01-01T00:00:00Z",
                "deletionTimestamp": "1970-01-01T00:00:00Z",
                "labels": {"selection.ocifit.io/managed": "true"},
            })
        );
    }
}
