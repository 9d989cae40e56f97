//! Platform placement: selected pods land only on nodes where every one of their containers can
//! run. Admission adds a scheduling gate and a tracking label and nothing else (`gate`); a
//! controller inspects the images through the registry room, computes the platforms every
//! container shares (`platforms`), and releases the pod in one update that narrows its node
//! affinity and adds tolerations and preferences (`release`), or holds it with a reason; repeated
//! inspection failures follow the policy's bound (`failure`). `select` says which policy selects a
//! pod, `policy` reads a stored policy once, `credentials` turns pull Secrets into registry
//! credentials, `pull_policy` says how fresh a tag must be, `status` counts a policy's pods.
//!
//! Every module here is pure: no I/O, time passed in. The adapters (admission route, pod watch,
//! registry calls, Events) are thin and live where the house puts them. Depends only on ground
//! rooms: `api`, `classes`, `registry`.

pub mod credentials;
pub mod failure;
pub mod gate;
pub mod platforms;
pub mod policy;
pub mod pull_policy;
pub mod release;
pub mod select;
pub mod status;

#[cfg(test)]
mod fixtures;
