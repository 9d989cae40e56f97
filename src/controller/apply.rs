//! Applying a computed status: server-side apply under the one field manager, Events for its
//! transitions (notes capped as Kubernetes requires), and the policies-by-condition gauges.

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::{Api, Resource, ResourceExt};

use super::context::Context;
use super::reconcile::Error;
use super::status::{Event, EventKind};
use crate::api::{FIELD_MANAGER, ImageSelectionPolicy, ImageSelectionPolicyStatus};

/// Kubernetes caps an Event's note at 1 kB.
const MAX_NOTE: usize = 1024;

pub(super) async fn write_status(
    ctx: &Context,
    name: &str,
    status: &ImageSelectionPolicyStatus,
) -> Result<(), Error> {
    let api: Api<ImageSelectionPolicy> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({
        "apiVersion": ImageSelectionPolicy::api_version(&()),
        "kind": ImageSelectionPolicy::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| Error::WriteStatus {
        name: name.to_owned(),
        source,
    })?;
    ctx.metrics.status_written();
    tracing::info!(policy = %name, classes = status.class_count, "status written");
    Ok(())
}

pub(super) async fn publish(ctx: &Context, policy: &ImageSelectionPolicy, event: &Event) {
    let mut note = event.note.clone();
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    let kube_event = KubeEvent {
        type_: match event.kind {
            EventKind::Normal => EventType::Normal,
            EventKind::Warning => EventType::Warning,
        },
        reason: event.reason.as_str().to_owned(),
        note: Some(note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    match ctx
        .recorder
        .publish(&kube_event, &policy.object_ref(&()))
        .await
    {
        Ok(()) => ctx.metrics.event_published(),
        Err(err) => {
            tracing::warn!(policy = %policy.name_any(), error = %err, "failed to publish an event");
        }
    }
}

/// Policies by condition, from the store with this policy's new status.
pub(super) fn update_policy_gauges(ctx: &Context, name: &str, status: &ImageSelectionPolicyStatus) {
    let policies = ctx.stores.policies.state();
    let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
    let statuses = policies
        .iter()
        .filter(|p| p.name_any() != name)
        .filter_map(|p| p.status.as_ref())
        .chain(std::iter::once(status));
    for s in statuses {
        for c in &s.conditions {
            *counts
                .entry((c.type_.clone(), c.status.clone()))
                .or_default() += 1;
        }
    }
    ctx.metrics.set_policies(
        counts
            .iter()
            .map(|((t, s), n)| ((t.as_str(), s.as_str()), *n)),
    );
}
