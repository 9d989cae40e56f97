//! What a helper container moved, written as its termination message (JSON, one small object) for
//! the artifact cache to count once the container has finished: `prepare` reports its pulls,
//! `deliver` its pushes. `kubectl describe pod` shows it as the container's message, with the
//! reason when it failed.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The kubelet keeps at most this much of a termination message; a report is cut to fit.
pub(super) const MESSAGE_LIMIT: usize = 4096;

/// Which way a helper moved artifacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Pull,
    Push,
}

impl Direction {
    pub const fn as_str(self) -> &'static str {
        match self {
            Direction::Pull => "pull",
            Direction::Push => "push",
        }
    }
}

/// What a helper's container moved before it finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub direction: Direction,
    /// Whether every transfer asked of it succeeded.
    pub ok: bool,
    /// Bytes of the layers moved (as stored in the registry).
    pub bytes: u64,
    /// Layers moved.
    pub files: u64,
    /// Time spent moving them, in seconds.
    pub seconds: f64,
    /// Why it failed, for `kubectl describe pod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Report {
    pub fn new(direction: Direction) -> Self {
        Report {
            direction,
            ok: true,
            bytes: 0,
            files: 0,
            seconds: 0.0,
            error: None,
        }
    }

    /// Adds one artifact moved: its layers' sizes, in `took`.
    pub fn moved(&mut self, sizes: impl IntoIterator<Item = u64>, took: Duration) {
        for size in sizes {
            self.bytes = self.bytes.saturating_add(size);
            self.files += 1;
        }
        self.seconds += took.as_secs_f64();
    }

    /// Marks the report failed, with why.
    pub fn failed(&mut self, why: String) {
        self.ok = false;
        self.error = Some(why);
    }

    /// The report as a termination message: JSON within `MESSAGE_LIMIT`, the error cut short
    /// (at a character boundary) when it would not fit.
    pub fn message(&self) -> String {
        let whole = serde_json::to_string(self).unwrap_or_default();
        if whole.len() <= MESSAGE_LIMIT {
            return whole;
        }
        let mut cut = self.clone();
        let error = cut.error.take().unwrap_or_default();
        let room = MESSAGE_LIMIT - serde_json::to_string(&cut).unwrap_or_default().len() - 64;
        let mut end = room.min(error.len());
        while !error.is_char_boundary(end) {
            end -= 1;
        }
        cut.error = Some(format!("{}…", &error[..end]));
        serde_json::to_string(&cut).unwrap_or_default()
    }

    /// Writes the report to `path` (the container's termination message path). A report that
    /// cannot be written is logged: the transfer itself is what the step needs.
    pub fn write(&self, path: &Path) {
        if let Err(err) = std::fs::write(path, self.message()) {
            tracing::warn!(path = %path.display(), %err, "the transfer report could not be written");
        }
    }

    /// A container's termination message read back; `None` when it is not a report (a step's
    /// own message, or one from a helper before reports).
    pub fn read(message: &str) -> Option<Report> {
        serde_json::from_str(message.trim()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_as_written() {
        let mut report = Report::new(Direction::Push);
        report.moved([10, 32], Duration::from_millis(1500));
        report.moved([5], Duration::from_millis(500));
        assert_eq!(report.bytes, 47);
        assert_eq!(report.files, 3);
        assert_eq!(Report::read(&report.message()), Some(report.clone()));
        report.failed("failed to push to r/x:1: 503".into());
        let read = Report::read(&report.message()).unwrap();
        assert!(!read.ok);
        assert_eq!(read.error.as_deref(), Some("failed to push to r/x:1: 503"));
    }

    #[test]
    fn a_long_error_is_cut_to_fit_the_kubelets_limit_and_still_reads() {
        let mut report = Report::new(Direction::Pull);
        report.failed("é".repeat(10_000));
        let message = report.message();
        assert!(message.len() <= MESSAGE_LIMIT, "{}", message.len());
        let read = Report::read(&message).unwrap();
        assert!(read.error.unwrap().ends_with('…'));
    }

    #[test]
    fn a_message_that_is_not_a_report_is_not_counted() {
        assert_eq!(Report::read("failed to pull input a:1: not found"), None);
        assert_eq!(Report::read(""), None);
    }
}
