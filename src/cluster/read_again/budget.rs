//! What admission's reads from the apiserver may cost, whoever sends the reviews that ask for
//! them (anyone who reaches the webhook port can name objects that do not exist). A read is
//! taken only when its key was not found missing within [`FORGET_AFTER`], a token is left in the
//! shared bucket ([`RATE`] a second, [`BURST`] at once), and fewer than [`MAX_READING`] reads
//! wait on the apiserver; otherwise the caller decides at once on what its store holds. Pure:
//! the time is given.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Reads a second the bucket refills with: a real review needs a read only for a namespace
/// created a moment before its first pod, or a step whose cache became Ready a moment before.
pub(super) const RATE: f64 = 5.0;
/// Reads the bucket holds (a burst of new namespaces).
pub(super) const BURST: f64 = 10.0;
/// How long a key read and not found is not read again.
pub(super) const FORGET_AFTER: Duration = Duration::from_secs(10);
/// Reads waiting on the apiserver at once, over every route: each holds a blocking thread.
pub(super) const MAX_READING: usize = 2;

/// The shared budget (one per process: [`super::ReadAgain::from_apiserver`] takes from it).
#[derive(Debug)]
pub struct Budget {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    refilled: Instant,
    /// Keys read and not found, until when they are not read again. At most
    /// `BURST + RATE × FORGET_AFTER` live entries: each follows a read the bucket allowed.
    missing: HashMap<String, Instant>,
    reading: usize,
}

/// Why a read was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// The key was read and not found within [`FORGET_AFTER`].
    KnownMissing,
    /// The bucket is empty.
    NoToken,
    /// [`MAX_READING`] reads are waiting already.
    Busy,
}

/// A read the budget allowed: ends with [`Reading::found`] or [`Reading::missing`]; dropped
/// without either (a panic) it frees its place only.
#[derive(Debug)]
pub struct Reading {
    budget: Arc<Budget>,
    key: String,
}

impl Budget {
    /// A full bucket at `now`, nothing known missing.
    pub fn new(now: Instant) -> Arc<Budget> {
        Arc::new(Budget {
            state: Mutex::new(State {
                tokens: BURST,
                refilled: now,
                missing: HashMap::new(),
                reading: 0,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update below is whole before it can panic: a poisoned state is consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A read of `key` at `now`, or why not.
    pub fn take(self: &Arc<Self>, key: &str, now: Instant) -> Result<Reading, Skipped> {
        let mut state = self.state();
        if state.missing.get(key).is_some_and(|until| *until > now) {
            return Err(Skipped::KnownMissing);
        }
        if state.reading >= MAX_READING {
            return Err(Skipped::Busy);
        }
        let elapsed = now.saturating_duration_since(state.refilled).as_secs_f64();
        state.tokens = (state.tokens + elapsed * RATE).min(BURST);
        state.refilled = state.refilled.max(now);
        if state.tokens < 1.0 {
            return Err(Skipped::NoToken);
        }
        state.tokens -= 1.0;
        state.reading += 1;
        Ok(Reading {
            budget: Arc::clone(self),
            key: key.to_owned(),
        })
    }
}

impl Reading {
    /// The key was found: read it whenever asked.
    pub fn found(self) {
        self.budget.state().missing.remove(&self.key);
    }

    /// The key was not found, or not read in time, at `now`: not read again for
    /// [`FORGET_AFTER`].
    pub fn missing(self, now: Instant) {
        let mut state = self.budget.state();
        state.missing.retain(|_, until| *until > now);
        state.missing.insert(self.key.clone(), now + FORGET_AFTER);
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.budget.state().reading -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flood naming one unknown key costs one read per [`FORGET_AFTER`].
    #[test]
    fn a_key_found_missing_is_not_read_again_until_forgotten() {
        let start = Instant::now();
        let budget = Budget::new(start);
        budget.take("ghost", start).unwrap().missing(start);
        for step in 0..100 {
            let now = start + Duration::from_millis(step * 50);
            assert_eq!(
                budget.take("ghost", now).unwrap_err(),
                Skipped::KnownMissing
            );
        }
        let later = start + FORGET_AFTER + Duration::from_millis(1);
        assert!(budget.take("ghost", later).is_ok());
    }

    /// Distinct unknown keys (one each, as a forger would send) cost at most the bucket: a
    /// burst, then [`RATE`] a second.
    #[test]
    fn distinct_keys_share_one_bucket() {
        let start = Instant::now();
        let budget = Budget::new(start);
        let mut read = 0;
        for i in 0..1000 {
            // 1,000 reviews over 10 s, each naming a new key.
            let now = start + Duration::from_millis(i * 10);
            if let Ok(reading) = budget.take(&format!("ns-{i}"), now) {
                read += 1;
                reading.missing(now);
            }
        }
        let allowed = BURST + RATE * 10.0;
        assert!(f64::from(read) <= allowed, "{read} reads, over {allowed}");
        assert!(read >= 50, "{read}");
    }

    /// Reads waiting on a slow apiserver are capped; the others are skipped at once, never
    /// queued.
    #[test]
    fn reads_waiting_at_once_are_capped() {
        let now = Instant::now();
        let budget = Budget::new(now);
        let waiting: Vec<Reading> = (0..MAX_READING)
            .map(|i| budget.take(&format!("slow-{i}"), now).unwrap())
            .collect();
        assert_eq!(budget.take("another", now).unwrap_err(), Skipped::Busy);
        drop(waiting);
        assert!(budget.take("another", now).is_ok());
    }

    /// A key found is read whenever asked (within the bucket): a real namespace is never
    /// taken for missing.
    #[test]
    fn a_key_found_stays_readable() {
        let now = Instant::now();
        let budget = Budget::new(now);
        budget.take("real", now).unwrap().found();
        assert!(budget.take("real", now).is_ok());
    }
}
