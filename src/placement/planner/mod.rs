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
pub use audit::{Finding, Misplacement, as_run, audited, judge, node, recreating_owner, to_evict};
pub use compiled::{Compiled, PolicySet, UsablePolicies};
pub use credentials::{PullSecrets, SecretProblem, operator_credentials};
pub use exec_format::{Failure, Known, Seen, describe, failures, inspected_digest, spec_image};
pub use gate::{GatePlan, Leave, plan_gate};
pub use held::{held_selector, release_patch, released, trim_held};
pub use platforms::{ContainerImage, intersect};
pub use pod_view::{GatePod, PodView};
pub use policy::{Policy, PolicyError, trim_policy};
pub use pull_policy::{Freshness, effective, freshness};
pub use release::{
    Inspected, Inspection, InspectionFailure, Note, ReleaseInputs, ReleasePlan, containers,
    plan_release, without_policy,
};
pub use retries::{Retries, images};
pub use select::{Namespace, NotSelected, recheck, select};
pub use taints::plan_taints;
