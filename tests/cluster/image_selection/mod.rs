//! Image selection: `ocifit run` resolving ImageSelectionPolicies against nodes and a real registry,
//! and its `/mutate` webhook behind the real apiserver.

mod candidates;
mod failures;
mod flavors;
mod nfd;
mod webhook;
