//! `ocifit release-gates`: removes every scheduling gate ocifit adds (placement's, image
//! selection's and the artifact cache's, or those `--gate` names) from every pod still holding
//! one, leaving any other gate alone — what the chart's uninstall hook runs, so no pod waits on a
//! gate only ocifit would remove. Runnable with nothing but a kubeconfig, whether ocifit runs or
//! not. `--dry-run` lists the pods it would release and writes nothing. `ocifit placement
//! release-all` is its deprecated alias for placement's gate alone.

use std::process::ExitCode;

use serde::Serialize;

use super::Exit;
use super::{Output, OutputArgs};
use crate::cluster::{Gate, GateError, Scope, release_all};
use crate::startup::KubeArgs;

/// A gate ocifit adds, as `--gate` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GateName {
    /// Placement's `placement.ocifit.io/platforms`.
    Placement,
    /// Image selection's `selection.ocifit.io/image`.
    ImageSelection,
    /// The artifact cache's `artifacts.ocifit.io/cache` (a workflow step waiting for its cache).
    ArtifactCache,
}

impl GateName {
    /// The gate and the label its pods carry.
    pub const fn gate(self) -> Gate {
        match self {
            GateName::Placement => crate::placement::GATE,
            GateName::ImageSelection => crate::image_selection::GATE,
            GateName::ArtifactCache => crate::artifact_cache::GATE,
        }
    }
}

/// `ocifit release-gates`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ReleaseGatesArgs {
    /// Which cluster and namespace: the global flags, filled in by `cli::run`.
    #[arg(skip)]
    pub kube: KubeArgs,
    /// Only this gate (repeatable); default every gate ocifit adds.
    #[arg(long = "gate", value_enum, value_name = "GATE")]
    pub gates: Vec<GateName>,
    /// List the pods that would be released; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What a release did (or, dry-run, would do), as `-o json|yaml` prints it.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReleaseReport {
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Every pod released (or that would be), with the gate.
    pub released: Vec<ReleasedPod>,
    /// Every failure, in a sentence.
    pub failed: Vec<String>,
}

/// One pod released from one gate.
#[derive(Debug, Serialize)]
pub(super) struct ReleasedPod {
    /// `namespace/name`.
    pub pod: String,
    /// The gate removed.
    pub gate: &'static str,
}

impl ReleaseReport {
    /// How many distinct pods were released (a pod may have held several gates).
    fn pods(&self) -> usize {
        let pods: std::collections::BTreeSet<&str> =
            self.released.iter().map(|p| p.pod.as_str()).collect();
        pods.len()
    }

    /// One line per pod and gate, then the count.
    pub(super) fn table(&self) -> String {
        let verb = if self.dry_run {
            "would release"
        } else {
            "released"
        };
        let mut out = String::new();
        for pod in &self.released {
            out.push_str(&format!("{verb} {} ({})\n", pod.pod, pod.gate));
        }
        let count = if self.dry_run {
            "pod(s) would be released (dry run: nothing changed)"
        } else {
            "pod(s) released"
        };
        out.push_str(&format!("{} {count}\n", self.pods()));
        out
    }
}

/// Runs `ocifit release-gates`.
pub(super) async fn run(args: &ReleaseGatesArgs) -> ExitCode {
    let gates: Vec<Gate> = if args.gates.is_empty() {
        vec![
            crate::placement::GATE,
            crate::image_selection::GATE,
            crate::artifact_cache::GATE,
        ]
    } else {
        args.gates.iter().map(|g| g.gate()).collect()
    };
    let scope = Scope {
        namespace: args.kube.namespace.clone(),
        dry_run: args.dry_run,
    };
    release(&args.kube, &gates, &scope, args.output.output).await
}

/// Removes each of `gates` from every pod in `scope` holding it and reports each pod: exit 0
/// when every one was released, [`Exit::Failed`] when some were not (every other one still
/// is, and each failure is named), the cluster's or the input's code when none could be listed.
pub(super) async fn release(
    kube: &KubeArgs,
    gates: &[Gate],
    scope: &Scope,
    output: Output,
) -> ExitCode {
    let client = match super::connect(kube).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    let mut report = ReleaseReport {
        dry_run: scope.dry_run,
        ..ReleaseReport::default()
    };
    let mut exit = Exit::Ok;
    for gate in gates {
        match release_all(client.clone(), *gate, scope).await {
            Ok(released) => {
                report
                    .released
                    .extend(released.pods.into_iter().map(|pod| ReleasedPod {
                        pod,
                        gate: gate.name,
                    }));
                if !released.failed.is_empty() && exit == Exit::Ok {
                    exit = Exit::Failed;
                }
                report.failed.extend(
                    released
                        .failed
                        .iter()
                        .map(|failure| crate::telemetry::error_chain(failure)),
                );
            }
            Err(err) => {
                if let GateError::List { source, .. } = &err {
                    exit = Exit::of_kube(source);
                }
                report.failed.push(crate::telemetry::error_chain(&err));
            }
        }
    }
    for failure in &report.failed {
        eprintln!("error: {failure}");
    }
    output.print(&report, ReleaseReport::table);
    exit.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dry_run_says_would_and_counts_each_pod_once() {
        let report = ReleaseReport {
            dry_run: true,
            released: vec![
                ReleasedPod {
                    pod: "shop/web".into(),
                    gate: "placement.ocifit.io/platforms",
                },
                ReleasedPod {
                    pod: "shop/web".into(),
                    gate: "selection.ocifit.io/image",
                },
            ],
            failed: vec![],
        };
        assert_eq!(
            report.table(),
            "would release shop/web (placement.ocifit.io/platforms)\n\
             would release shop/web (selection.ocifit.io/image)\n\
             1 pod(s) would be released (dry run: nothing changed)\n"
        );
    }
}
