//! `ocifit artifact` against the real registry: interoperability with the ORAS Python SDK both
//! ways (`interop`), a step's helpers as its pod runs them, without a kubelet (`steps`), and the
//! pushing sidecar against a step's code that forges the hand-off (`step_code`); logging in as
//! `oras` does (docker config, credential helpers, flags) and `PATH:MEDIA_TYPE` (`login`).

// Helpers outside #[test] fns fail the test loudly on bad setup, as the tests do.
#![allow(clippy::unwrap_used)]

mod interop;
mod login;
mod step_code;
mod steps;
mod support;
