//! The placement pod contract: the scheduling gate, labels, annotations and taint ocifit reads
//! and writes on pods and nodes. Everything carries the `placement.ocifit.io/` prefix, so
//! `kubectl get pods -l placement.ocifit.io/policy` finds every pod ocifit gated.

/// The scheduling gate admission adds; the controller removes it once the pod is placed.
pub const SCHEDULING_GATE: &str = "placement.ocifit.io/platforms";

/// Label admission adds beside the gate, valued with the name of the policy that selected the
/// pod. The controller watches pods by it; it stays after release, as a record.
pub const POLICY_LABEL: &str = "placement.ocifit.io/policy";

/// Label the controller's release adds (value `"true"`), and admission removes from a pod it
/// gates (a copy of a released pod carries it). It takes the pod out of every replica's watch,
/// so what a replica holds does not grow with the pods it released.
pub const RELEASED_LABEL: &str = "placement.ocifit.io/released";

/// Label a pod (or its template) carries to opt out, with the value [`OPT_OUT_VALUE`].
pub const ENABLED_LABEL: &str = "placement.ocifit.io/enabled";
/// The value of [`ENABLED_LABEL`] that opts a pod out.
pub const OPT_OUT_VALUE: &str = "false";

/// Decision annotation: what the controller did, one of [`Outcome`]'s names.
pub const OUTCOME_ANNOTATION: &str = "placement.ocifit.io/outcome";
/// Decision annotation: the platforms the pod was constrained to, e.g. `linux/amd64,linux/arm64`
/// (a variant, as in `linux/arm/v7`, is the lowest one some container needs).
pub const PLATFORMS_ANNOTATION: &str = "placement.ocifit.io/platforms";
/// Decision annotation: a JSON map from container name to the image digest inspected.
pub const DIGESTS_ANNOTATION: &str = "placement.ocifit.io/digests";
/// Decision annotation: why, in a sentence (why held, why unconstrained, which error).
pub const MESSAGE_ANNOTATION: &str = "placement.ocifit.io/message";
/// How many inspections of the pod failed so far; kept on the pod so a restarted controller
/// neither forgets nor repeats the bound.
pub const ATTEMPTS_ANNOTATION: &str = "placement.ocifit.io/failed-attempts";

/// The taint key of node-tainting mode; its value is the node's architecture.
pub const TAINT_KEY: &str = "placement.ocifit.io/arch";

/// Namespaces never selected, whatever a policy says (besides ocifit's own).
pub const EXCLUDED_NAMESPACES: [&str; 1] = ["kube-system"];

/// What the controller did with a gated pod, as written in [`OUTCOME_ANNOTATION`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Released, constrained to the platforms every container can run on.
    Constrained,
    /// Released with no platform constraint (per the policy's failure or no-common-platform
    /// choice).
    Unconstrained,
    /// Released, constrained to the policy's fallback architecture after inspection failed.
    Fallback,
    /// Kept gated on purpose; the message says why.
    Held,
}

impl Outcome {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Constrained => "Constrained",
            Self::Unconstrained => "Unconstrained",
            Self::Fallback => "Fallback",
            Self::Held => "Held",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
