//! The placement controller (leader only): every pod carrying ocifit's tracking label is watched
//! (a label selector, so the store holds only those pods, not the cluster's), the gated ones are
//! reconciled ([`reconcile`]) as they appear and again when their retry is due, all of them on
//! becoming leader; the policies' status counts and `Ready` condition are written by
//! [`status_write`] (with the releases it tallies: a released pod leaves the watch), node
//! tainting by [`node_tainting`]; released pods whose containers fail with `exec format error` are reported by
//! [`exec_errors`]; running pods on the wrong platform are found, reported and, when a policy
//! says so, evicted by [`audit`].

mod audit;
mod context;
mod exec_errors;
mod node_tainting;
mod reconcile;
mod slots;
mod status_write;

pub(super) use audit::Auditor;
pub(super) use exec_errors::ExecErrorReporter;
pub use exec_errors::REASON;
pub(super) use node_tainting::keep_node_taints;
pub(super) use status_write::Tally;
pub(super) use status_write::{StatusKeeper, keep_status};

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::Controller;
use kube::runtime::controller::Config;

use crate::cluster::{Change, Reflected};
use crate::telemetry::error_chain;
pub(super) use context::Context;
use reconcile::{error_policy, gated, reconcile};

/// Gated pods reconciled at once (each waits mostly on the registry).
const CONCURRENCY: u16 = 64;
/// Gated pods of one namespace reconciled at once: a namespace whose registry stalls holds at
/// most this share of [`CONCURRENCY`], or up to [`BORROW_BELOW`] while the others leave it idle.
const PER_NAMESPACE: usize = 8;
/// A namespace may reconcile past its share while fewer than this many reconciles are in flight
/// in all: half of [`CONCURRENCY`] stays for namespaces within their share.
const BORROW_BELOW: usize = CONCURRENCY as usize / 2;

/// The controller's reconcile slots per namespace, at the shares above, and the pods they wake.
pub(super) fn namespace_slots() -> (slots::NamespaceSlots, slots::Wakes) {
    slots::NamespaceSlots::new(PER_NAMESPACE, BORROW_BELOW)
}

/// The controller over `pods`; the future runs it until `shutdown` resolves and every
/// in-flight reconcile has finished.
pub(super) fn controller(
    context: Context,
    pods: &Reflected<Pod>,
    wakes: slots::Wakes,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> BoxFuture<'static, ()> {
    let gained = context.cluster.leadership.gained();
    let gated_pods = pods.subscribe().filter_map(|change| {
        std::future::ready(match change {
            Change::Applied(pod) if gated(&pod) => Some(pod),
            _ => None,
        })
    });
    Controller::for_shared_stream(gated_pods, pods.store())
        .with_config(Config::default().concurrency(CONCURRENCY))
        .reconcile_all_on(gained)
        .reconcile_on(wakes.into_stream())
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, Arc::new(context))
        .for_each(|result| {
            if let Err(err) = result {
                tracing::debug!(error = %error_chain(&err), "placement controller event");
            }
            std::future::ready(())
        })
        .boxed()
}
