//! How much one pull may write, over all its artifacts and layers: bytes of file content and
//! entries (files, directories, links, each archive entry). A layer's gzip may hold far more than
//! its size (a gzip bomb), and an archive a million empty files: each entry's size is taken from
//! the budget before a byte of it is written, so a pull that would pass a limit stops there with
//! an error naming it, and the volume it writes to never holds more. Shared by the layers that move
//! at once, so it counts with atomics.

use std::sync::atomic::{AtomicU64, Ordering};

use clap::Args;

/// Bytes one pull may write unless told otherwise: the size of the inputs volume ocifit gives a
/// step (`sizeLimit` of its emptyDir).
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024 * 1024;
/// Entries one pull may write unless told otherwise: many small files fit, a million do not (each
/// is an inode of the node's disk, which every pod on it shares).
pub(super) const DEFAULT_MAX_ENTRIES: u64 = 250_000;

/// The limits, as `pull` and `prepare` take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct Limits {
    /// The most bytes of file content a pull writes (over all its artifacts); more is refused.
    #[arg(long, default_value_t = DEFAULT_MAX_BYTES)]
    pub max_bytes: u64,
    /// The most files, directories and links a pull writes (over all its artifacts); more is
    /// refused.
    #[arg(long, default_value_t = DEFAULT_MAX_ENTRIES)]
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: DEFAULT_MAX_BYTES,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

/// A limit a pull would pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    #[error(
        "refused: the pull would write more than {limit} bytes of files, its limit (--max-bytes); nothing beyond it was written"
    )]
    Bytes { limit: u64 },
    #[error(
        "refused: the pull would write more than {limit} files, directories and links, its limit (--max-entries); nothing beyond it was written"
    )]
    Entries { limit: u64 },
}

/// What is left of the limits during one pull.
#[derive(Debug)]
pub struct Budget {
    limits: Limits,
    bytes: AtomicU64,
    entries: AtomicU64,
}

impl Budget {
    pub fn new(limits: Limits) -> Self {
        Budget {
            limits,
            bytes: AtomicU64::new(0),
            entries: AtomicU64::new(0),
        }
    }

    /// Takes one entry of `bytes` bytes, or refuses it whole (nothing is taken then).
    pub fn take(&self, bytes: u64) -> Result<(), Exceeded> {
        take(&self.bytes, bytes, self.limits.max_bytes)
            .map_err(|limit| Exceeded::Bytes { limit })?;
        take(&self.entries, 1, self.limits.max_entries).map_err(|limit| {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            Exceeded::Entries { limit }
        })
    }
}

/// Adds `amount` to `used` unless that passes `limit`; the limit when it would.
fn take(used: &AtomicU64, amount: u64, limit: u64) -> Result<(), u64> {
    used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
        now.checked_add(amount).filter(|after| *after <= limit)
    })
    .map(|_| ())
    .map_err(|_| limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_takes_up_to_its_limits_and_refuses_the_entry_that_passes_one() {
        let budget = Budget::new(Limits {
            max_bytes: 10,
            max_entries: 3,
        });
        budget.take(6).unwrap();
        assert_eq!(budget.take(5), Err(Exceeded::Bytes { limit: 10 }));
        // The refused entry took nothing: what is left still fits.
        budget.take(4).unwrap();
        assert_eq!(budget.take(u64::MAX), Err(Exceeded::Bytes { limit: 10 }));
        budget.take(0).unwrap();
        assert_eq!(budget.take(0), Err(Exceeded::Entries { limit: 3 }));
    }
}
