//! `ocifit-dev demo`: the README's one-command demo. It starts the full local cluster and a
//! registry, pushes the flavor example (three small images and `example/flavor-compat.json` with
//! its tags pointed at them), creates the nodes of `example/flavor-nodes.json`, starts the built
//! `ocifit run` on the host with a webhook certificate from [`crate::pki`], registers the webhook
//! for opted-in pods, applies `example/policy.yaml` and the three flavor pods of
//! `example/pods/`, waits until they are bound and prints what happened. The product decides
//! everything; this module only sets the stage and reports. `tools/demo` is its thin wrapper.

mod report;
mod stage;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::error::{Result, io};
use crate::process::Process;

pub use report::Placement;

/// The opt-in label of the pod contract (the webhook's objectSelector).
pub const OPT_IN_LABEL: &str = "oci.image.compatibilities.selection/enabled";
/// The node label the flavor example's rules read.
pub const FLAVOR_LABEL: &str = "feature.node.ocifit-k8s.flavor";
/// The flavor pods, by file name under `example/pods/` (and pod name).
pub const FLAVOR_PODS: [&str; 3] = ["vanilla", "chocolate", "strawberry"];
/// Where the summary is written once everything is up; `tools/demo` waits for it.
pub const SUMMARY_FILE: &str = "summary.txt";

/// How the demo runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// The repository (for `crds/` and `example/`).
    pub repo: PathBuf,
    /// The `ocifit` binary to run.
    pub ocifit: PathBuf,
    /// Where the certificate, `ocifit run`'s log and the summary go.
    pub state_dir: PathBuf,
    /// How long each wait (policy Ready, webhook active, pods bound) may take.
    pub timeout: Duration,
    /// Whether the demo stays up after the summary (the summary then says how to explore it).
    pub stays_up: bool,
}

/// A running demo: the cluster, `ocifit run`, and where each flavor pod landed.
pub struct Demo {
    /// `ocifit run` (killed on drop, before the cluster it talks to).
    ocifit: Process,
    /// The cluster and registry (removed on drop).
    pub cluster: Cluster,
    /// Each flavor pod with its node and image.
    pub placements: Vec<Placement>,
    /// What to print.
    pub summary: String,
}

impl Demo {
    /// Whether every flavor pod is bound to a node of its flavor with that flavor's image.
    pub fn succeeded(&self) -> bool {
        !self.placements.is_empty() && self.placements.iter().all(Placement::is_right)
    }

    /// An error if `ocifit run` has exited.
    pub fn check_running(&mut self) -> Result<()> {
        self.ocifit.check_running("the demo to be stopped")
    }
}

/// Runs the demo up to the summary, printing progress lines; the summary is also written to
/// `<state_dir>/summary.txt`.
pub async fn start(options: &DemoOptions) -> Result<Demo> {
    std::fs::create_dir_all(&options.state_dir)
        .map_err(io("create the demo state directory", &options.state_dir))?;
    let summary_path = options.state_dir.join(SUMMARY_FILE);
    let _ = std::fs::remove_file(&summary_path);
    let staged = stage::stage(options).await?;
    let placements = report::placements(&staged.cluster, &staged.images).await?;
    let summary = report::summary(
        &staged.cluster,
        &placements,
        &options.repo,
        options.stays_up,
    )
    .await?;
    write_atomically(&summary_path, &summary)?;
    Ok(Demo {
        ocifit: staged.ocifit,
        cluster: staged.cluster,
        placements,
        summary,
    })
}

fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).map_err(io("write", &partial))?;
    std::fs::rename(&partial, path).map_err(io("rename", &partial))
}

/// A progress line, flushed at once (the demo's log is read while it runs).
fn say(line: &str) {
    println!("[demo] {line}");
}
