//! Waiting for an object of the demo to say it is Ready.

use std::time::{Duration, Instant};

use super::say;
use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::process::Process;

/// Waits until `kind`/`name` says `Ready` True (printed as `label Ready after …`), failing early
/// if `ocifit` (when given) has exited.
pub(super) async fn wait_ready(
    cluster: &Cluster,
    (kind, name, label): (&str, &str, &str),
    mut ocifit: Option<&mut Process>,
    timeout: Duration,
) -> Result<()> {
    let started = Instant::now();
    let what = format!("{label} to become Ready");
    loop {
        if let Some(ocifit) = ocifit.as_deref_mut() {
            ocifit.check_running(&what)?;
        }
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
                log_tails: ocifit
                    .map(|ocifit| ocifit.log_tail(crate::process::LOG_TAIL_LINES))
                    .unwrap_or_default(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
