//! Applying a computed status: server-side apply under the one field manager, Events for its
//! transitions (through the cluster view's reporter), and the policies-by-condition gauges.

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::Error;
use super::context::Context;
use crate::api::{FIELD_MANAGER, ImageSelectionPolicy, ImageSelectionPolicyStatus};
use crate::cluster::Notice;
use crate::image_selection::resolution::{Event, EventKind};

pub(super) async fn write_status(
    ctx: &Context,
    name: &str,
    status: &ImageSelectionPolicyStatus,
) -> Result<(), Error> {
    let api: Api<ImageSelectionPolicy> = Api::all(ctx.cluster.client.clone());
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
    ctx.reporter
        .publish(Notice {
            on: policy.object_ref(&()),
            warning: event.kind == EventKind::Warning,
            reason: event.reason.as_str(),
            action: "Reconcile",
            note: event.note.clone(),
        })
        .await;
}

/// Policies by condition, from the store with this policy's new status.
pub(super) fn update_policy_gauges(ctx: &Context, name: &str, status: &ImageSelectionPolicyStatus) {
    let policies = ctx.policies.state();
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
