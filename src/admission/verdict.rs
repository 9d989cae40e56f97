//! A planner's answer as the host reads it: the response to send and the labels to count it
//! under, in the planner's own vocabulary.

use super::patch::Patched;

/// What the host sends back for a verdict.
#[derive(Debug)]
pub enum Response<'a> {
    /// Admit, with this patch (if any) and these warnings.
    Allow {
        /// The JSON patch against the object as sent.
        patch: Option<Patched<'a>>,
        /// Warnings shown to the user.
        warnings: Vec<String>,
    },
    /// Refuse, with this message.
    Deny(String),
}

/// A planner's answer to one request, in the planner's own vocabulary.
pub trait Verdict {
    /// The `outcome` label of `ocifit_admissions_total` (e.g. `patched`, `denied`, `skipped`).
    fn outcome(&self) -> &'static str;
    /// The `reason` label: the name of the decision, denial or skip.
    fn reason(&self) -> &'static str;
    /// The response to send.
    fn response(&self) -> Response<'_>;
}
