//! `ocifit-dev demo`: the README's one-command demo. It starts the full local cluster, a registry
//! and a real node (a vanilla worker, tainted so only the pod meant for it lands there), pushes the
//! flavor example (an image per flavor that really runs on this machine's platform, and
//! `example/flavor-compat.json` with its tags pointed at them; see [`crate::flavors`]), creates the
//! nodes of `example/flavor-nodes.json`, installs ocifit as users do, `helm install` of its chart
//! with ocifit's own image built here (on the real node; the chart registers the webhooks and
//! manages their certificate), applies `example/policy.yaml`, the three flavor pods of
//! `example/pods/` and one pod for the real node, waits until they are bound and the real one has
//! logged its image's line; applies `example/placement/` (a Deployment whose sidecar is
//! arm64-only) and waits until its replicas are bound; runs the artifact cache's workflow; and
//! prints what happened. The product decides everything; this module only sets the stage and
//! reports. `tools/demo` is its thin wrapper.

mod install;
mod platform_placement;
mod ready;
mod report;
mod stage;
mod table;
mod workflow;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::error::{Result, io};
use crate::flavors::flavor_line;
use crate::pods::wait_for_pod_log;

pub use platform_placement::{PLACEMENT_NAMESPACE, Replica};
pub use report::Placement;
pub use workflow::{RESULT, WORKFLOW_NAMESPACE, WorkflowRun};

/// The opt-in label of the pod contract (the webhook's objectSelector).
pub const OPT_IN_LABEL: &str = "oci.image.compatibilities.selection/enabled";
pub use crate::flavors::FLAVOR_LABEL;
/// The flavor pods, by file name under `example/pods/` (and pod name).
pub const FLAVOR_PODS: [&str; 3] = ["vanilla", "chocolate", "strawberry"];
/// The real node: a vanilla worker, tainted so only the pod meant for it lands there.
pub const REAL_NODE: &str = "worker-real";
/// The real node's flavor.
pub const REAL_FLAVOR: &str = "vanilla";
/// The taint that keeps the example pods (meant for kwok's nodes) off the real node.
pub const REAL_NODE_TAINT: &str = "demo.ocifit.io/real-node";
/// The pod that really runs the image chosen for it, on the real node.
pub const REAL_POD: &str = "runs";
/// Where the summary is written once everything is up; `tools/demo` waits for it.
pub const SUMMARY_FILE: &str = "summary.txt";

/// How the demo runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// The repository (for `crds/` and `example/`).
    pub repo: PathBuf,
    /// The `ocifit` binary ocifit's image (installed by the chart) is assembled from.
    pub ocifit: PathBuf,
    /// Where the chart's values file, the workflow's result and the summary go.
    pub state_dir: PathBuf,
    /// How long each wait (policy Ready, webhook active, pods bound) may take.
    pub timeout: Duration,
    /// Whether the demo stays up after the summary (the summary then says how to explore it).
    pub stays_up: bool,
}

/// A running demo: the cluster with ocifit installed, and where each flavor pod landed.
pub struct Demo {
    /// The cluster and registry (removed on drop).
    pub cluster: Cluster,
    /// Each flavor pod with its node and image (the real node's pod last).
    pub placements: Vec<Placement>,
    /// The log of the pod on the real node.
    pub real_log: String,
    /// The placement example's replicas: where each landed.
    pub replicas: Vec<Replica>,
    /// The artifact cache's two-step workflow on the real node.
    pub workflow: WorkflowRun,
    /// What to print.
    pub summary: String,
}

impl Demo {
    /// Whether every flavor pod is bound to a node of its flavor with that flavor's image, the
    /// pod on the real node printed its image's line, every replica of the placement example is
    /// on an arm64 node constrained to linux/arm64, and the workflow's result (the sum of 1 to
    /// 10) came back from the cache.
    pub fn succeeded(&self) -> bool {
        !self.placements.is_empty()
            && self.placements.iter().all(Placement::is_right)
            && self.real_log.trim() == flavor_line(REAL_FLAVOR)
            && !self.replicas.is_empty()
            && self.replicas.iter().all(Replica::is_right)
            && self.workflow.result.trim() == "55"
    }

    /// An error if no replica of ocifit is available any more.
    pub async fn check_running(&self) -> Result<()> {
        install::check_running(&self.cluster).await
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
    let real_log = wait_for_pod_log(
        &staged.cluster.client()?,
        stage::POD_NAMESPACE,
        REAL_POD,
        &flavor_line(REAL_FLAVOR),
        options.timeout,
    )
    .await?;
    say(&format!(
        "pod {REAL_POD} runs its image on {REAL_NODE}: its log says {:?}",
        real_log.trim()
    ));
    let replicas = platform_placement::run(
        &staged.cluster,
        &options.repo,
        &staged.placement_images,
        options.timeout,
    )
    .await?;
    let workflow = workflow::run(
        &staged.cluster,
        &options.repo,
        &staged.workflow_images,
        &options.state_dir,
        options.timeout,
    )
    .await?;
    let summary = report::summary(
        &staged.cluster,
        &placements,
        &real_log,
        &replicas,
        &workflow,
        &options.repo,
        options.stays_up,
    )
    .await?;
    write_atomically(&summary_path, &summary)?;
    Ok(Demo {
        cluster: staged.cluster,
        placements,
        real_log,
        replicas,
        workflow,
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
