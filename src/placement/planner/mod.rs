//! Placement's decisions, pure (no I/O; time and reads passed in): a policy read once ([`policy`],
//! [`compiled`]), which pods it selects ([`select`]) and the gate admission adds ([`gate`]); for a
//! gated pod, the credentials and freshness of each image's lookup ([`credentials`],
//! [`pull_policy`]), the platforms every container shares ([`platforms`]) and the pod after one
//! update ([`release`], retried by [`failure`] and [`retries`]), written back as [`held`] says;
//! which taints a node wants ([`taints`]), the exec format errors of released pods
//! ([`exec_format`]) and the running-pod audit's verdicts ([`audit`]).

pub mod audit;
pub mod compiled;
pub mod credentials;
pub mod exec_format;
pub mod failure;
pub mod gate;
pub mod held;
pub mod platforms;
pub mod pod_view;
pub mod policy;
pub mod pull_policy;
pub mod release;
pub mod retries;
pub mod select;
pub mod taints;
