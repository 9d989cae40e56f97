//! `ocifit artifact` against the real registry: interoperability with the ORAS Python SDK both
//! ways (`interop`), and a step's helpers as its pod runs them, without a kubelet (`steps`).

// Helpers outside #[test] fns fail the test loudly on bad setup, as the tests do.
#![allow(clippy::unwrap_used)]

mod interop;
mod steps;
mod support;
