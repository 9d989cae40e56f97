//! ocifit's pure decisions, in a crate with no client, runtime or network dependency: the
//! compatibility engine (`engine`), the one platform model (`platform`) and node classes
//! (`classes`, which use both). The `ocifit` crate re-exports the three rooms under its own root.

pub mod classes;
pub mod engine;
pub mod platform;
