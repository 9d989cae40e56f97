//! The ArtifactCache a step names, wired: Ready (the step injected), starting with its endpoint
//! and credentials known (injected and held by the cache's gate until it is Ready), not wired yet
//! (a Job's injection left to its pods; a pod, which nobody would create again, refused), unable
//! to become Ready as it is, or missing (refused).

use std::collections::BTreeMap;

use super::mutation::Registry;
use super::{CACHE_MARKER, CacheState, Denial, StepPlan, patch};
use crate::api::step;

/// Where the step is, for what a cache not wired yet makes of it.
pub(super) struct Context<'a> {
    pub namespace: &'a str,
    /// The object's own annotations (the contract).
    pub annotations: &'a BTreeMap<String, String>,
    /// The pod's (or the Job's pod template's) annotations.
    pub template_annotations: &'a BTreeMap<String, String>,
    pub target: patch::Target,
}

/// The registry a step of cache `name` (in `state`) is wired to, and whether it is held; else the
/// plan for a step that cannot be wired.
pub(super) fn wire(
    name: &str,
    state: CacheState,
    context: &Context<'_>,
    warnings: &mut Vec<String>,
) -> Result<(Registry, bool), Box<StepPlan>> {
    let wired = |endpoint: String, plain_http, credentials| Registry {
        marker: format!("{CACHE_MARKER}{name} at {endpoint}"),
        host: endpoint,
        plain_http,
        credentials,
    };
    match state {
        CacheState::Ready {
            endpoint,
            plain_http,
            credentials,
        } => Ok((wired(endpoint, plain_http, credentials), false)),
        CacheState::Starting {
            endpoint,
            plain_http,
            credentials,
            reason,
        } => {
            warnings.push(format!(
                "ArtifactCache {name:?} is not Ready yet ({reason}): the step is held by scheduling gate {gate} until it is",
                gate = step::CACHE_GATE
            ));
            Ok((wired(endpoint, plain_http, credentials), true))
        }
        CacheState::NotReady { reason, stuck } => Err(Box::new(not_ready(
            name,
            reason,
            stuck,
            context,
            std::mem::take(warnings),
        ))),
        CacheState::Missing => Err(Box::new(StepPlan::Deny(Denial::CacheMissing {
            name: name.to_owned(),
            namespace: context.namespace.to_owned(),
        }))),
    }
}

/// A step whose cache exists but names no endpoint yet. A Job is admitted with its contract copied
/// onto its pod template (the Job controller recreates a refused pod); a bare pod, which nobody
/// recreates, is refused saying why, as is any step of a cache that cannot become Ready as it is.
fn not_ready(
    name: &str,
    reason: String,
    stuck: bool,
    context: &Context<'_>,
    mut warnings: Vec<String>,
) -> StepPlan {
    let refused = |reason| {
        StepPlan::Deny(Denial::CacheNotReady {
            name: name.to_owned(),
            reason,
        })
    };
    let patch::Target::Job {
        has_template_metadata,
        ..
    } = context.target
    else {
        return refused(reason);
    };
    if stuck {
        return refused(reason);
    }
    let patch = patch::defer(
        context.annotations,
        context.template_annotations,
        has_template_metadata,
    );
    warnings.push(format!(
        "ArtifactCache {name:?} is not Ready yet ({reason}): the Job's pods are injected as they are created, and held until it is Ready"
    ));
    StepPlan::Deferred { patch, warnings }
}
