//! Placement's decisions, pure (no I/O; time and reads passed in): a policy read once ([`policy`],
//! [`compiled`]), which pods it selects ([`select`]) and the gate admission adds ([`gate`]); for a
//! gated pod, the credentials and freshness of each image's lookup ([`credentials`],
//! [`pull_policy`]), the platforms every container shares ([`platforms`]) and the pod after one
//! update ([`release`], retried by [`failure`] and [`retries`]), written back as [`held`] says;
//! which taints a node wants ([`taints`]), the exec format errors of released pods
//! ([`exec_format`]) and the running-pod audit's verdicts ([`audit`]).

mod audit;
mod compiled;
mod credentials;
mod exec_format;
mod failure;
mod gate;
mod held;
mod platforms;
mod pod_view;
mod policy;
mod pull_policy;
mod release;
mod retries;
mod select;
mod taints;
pub use audit::Finding;
pub(super) use audit::{Misplacement, as_run, audited, judge, node, recreating_owner, to_evict};
pub(super) use compiled::Compiled;
pub use compiled::{PolicySet, UsablePolicies};
pub use credentials::PullSecrets;
pub(super) use credentials::{SecretProblem, operator_credentials};
pub(super) use exec_format::{
    Failure, Known, Seen, describe, failures, inspected_digest, spec_image,
};
pub(super) use gate::{GatePlan, Leave, plan_gate};
pub(super) use held::{held_selector, release_patch, released, trim_held};
pub use platforms::{ContainerImage, intersect};
pub(super) use pod_view::GatePod;
pub use pod_view::PodView;
pub(super) use policy::{Policy, PolicyError, trim_policy};
pub(super) use pull_policy::{Freshness, effective, freshness};
pub(super) use release::{
    Inspected, Inspection, InspectionFailure, Note, ReleaseInputs, ReleasePlan, containers,
    plan_release, without_policy,
};
pub(super) use retries::{Retries, images};
pub(super) use select::{Namespace, NotSelected, recheck, select};
pub(super) use taints::plan_taints;
