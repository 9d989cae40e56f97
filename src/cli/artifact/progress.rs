//! Progress of `ocifit artifact pull|push` on stderr: shown only when stderr is a terminal and the
//! transfer has moved more than a few MiB, so small transfers and CI logs get no progress lines.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;

use crate::registry::Registry;

/// Transfers below this show no progress.
pub(super) const SHOWN_FROM: u64 = 4 * 1024 * 1024;
const TICK: Duration = Duration::from_millis(200);

/// A transfer's progress line, updated from the client's streamed bytes.
pub(super) struct Progress {
    bar: ProgressBar,
    registry: Registry,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts following `registry`'s transfers, labelled `verb` ("pushing", "pulling").
    pub(super) fn start(registry: &Registry, verb: &'static str) -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if let Ok(style) =
            ProgressStyle::with_template("{prefix} {bytes} ({binary_bytes_per_sec}) {elapsed}")
        {
            bar.set_style(style);
        }
        bar.set_prefix(verb);
        let ticker = std::io::stderr().is_terminal().then(|| {
            let (bar, registry) = (bar.clone(), registry.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(TICK).await;
                    show(&bar, registry.streamed_bytes());
                }
            })
        });
        Progress {
            bar,
            registry: registry.clone(),
            ticker,
        }
    }

    /// Stops following, leaving the last line on a terminal when it was shown.
    pub(super) fn finish(mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
            show(&self.bar, self.registry.streamed_bytes());
            self.bar.finish();
        }
    }
}

impl Drop for Progress {
    /// A failed transfer stops the line where it was; the error follows on its own line.
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
            self.bar.abandon();
        }
    }
}

fn show(bar: &ProgressBar, moved: u64) {
    if moved >= SHOWN_FROM && bar.is_hidden() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    bar.set_position(moved);
}
