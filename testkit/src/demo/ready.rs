//! Waiting for an object of the demo to say it is Ready.

use std::time::{Duration, Instant};

use super::{install, say};
use crate::cluster::Cluster;
use crate::error::{Error, Result};

/// Waits until `kind`/`name` says `Ready` True (printed as `label Ready after …`).
pub(super) async fn wait_ready(
    cluster: &Cluster,
    (kind, name, label): (&str, &str, &str),
    timeout: Duration,
) -> Result<()> {
    let started = Instant::now();
    let what = format!("{label} to become Ready");
    loop {
        let ready = cluster
            .kubectl([
                "get",
                kind,
                name,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ])
            .await
            .unwrap_or_default();
        if ready.trim() == "True" {
            say(&format!(
                "{label} Ready after {:.1} s",
                started.elapsed().as_secs_f64()
            ));
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(Error::Timeout {
                what,
                timeout,
                log_tails: install::operator_state(cluster).await,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
