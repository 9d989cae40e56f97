//! A cluster for people: start everything, say how to reach it, keep it until Ctrl-C. The
//! `ocifit-dev` binary and the README's demo use this; the start itself is the cluster module's.

use std::fmt::Write as _;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use crate::cluster::{Cluster, ClusterBuilder};
use crate::error::{Error, Result};
use crate::registry::Registry;

/// A full cluster (controller-manager, scheduler, kwok) with a registry, optionally behind basic
/// auth (`(user, password)`).
pub fn full_cluster(registry_auth: Option<(&str, &str)>) -> ClusterBuilder {
    let registry = match registry_auth {
        Some((user, password)) => Registry::builder().with_basic_auth(user, password),
        None => Registry::builder(),
    };
    Cluster::builder()
        .with_all_controllers()
        .with_registry(registry)
}

/// What a person needs to use `cluster`: start-up times, `export` lines, the registry.
pub fn summary(cluster: &Cluster) -> String {
    let times = cluster.startup_times();
    let seconds = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    let mut text = format!(
        "cluster ready in {} (control plane {}",
        seconds(times.total),
        seconds(times.control_plane)
    );
    if let Some(controllers) = times.controllers {
        let _ = write!(text, ", controllers {}", seconds(controllers));
    }
    if let Some(registry) = times.registry {
        let _ = write!(text, ", registry {}", seconds(registry));
    }
    if let Some(nodes) = times.real_nodes {
        let _ = write!(text, ", real node {}", seconds(nodes));
    }
    let _ = write!(
        text,
        ")\n\nexport KUBECONFIG={}\n",
        cluster.kubeconfig().display()
    );
    if let Some(registry) = cluster.registry() {
        let _ = writeln!(text, "export OCIFIT_REGISTRY={}", registry.addr());
        if let Some(credentials) = registry.credentials() {
            let _ = writeln!(
                text,
                "# registry login: user {} password {}",
                credentials.username, credentials.password
            );
        }
    }
    text
}

/// Starts the cluster, prints its summary and keeps it until Ctrl-C or SIGTERM (then removes
/// everything).
pub async fn run_until_interrupted(builder: ClusterBuilder) -> Result<()> {
    let cluster = builder.start().await?;
    println!("{}", summary(&cluster));
    println!(
        "logs: {}/logs; press Ctrl-C to stop and remove it",
        cluster.dir().display()
    );
    stop_requested().await.map_err(Error::Signal)?;
    drop(cluster);
    println!("stopped");
    Ok(())
}

/// Waits for Ctrl-C or SIGTERM.
pub async fn stop_requested() -> std::io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted,
        _ = terminate.recv() => Ok(()),
    }
}
