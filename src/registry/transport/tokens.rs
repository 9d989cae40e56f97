//! Bearer tokens a client keeps between requests.

use std::collections::HashMap;
use std::time::Instant;

/// Bearer tokens kept per client; expired ones go first.
pub(super) const MAX_TOKENS: usize = 1024;

/// Bearer tokens by (host, repository) with their expiry. Expired tokens are dropped whenever a
/// new one comes, and at most [`MAX_TOKENS`] are kept (the soonest to expire goes first).
#[derive(Default)]
pub(super) struct Tokens(pub(super) HashMap<(String, String), (String, Instant)>);

impl Tokens {
    pub(super) fn get(&self, host: &str, repository: &str, now: Instant) -> Option<String> {
        let (token, expiry) = self.0.get(&(host.to_string(), repository.to_string()))?;
        (now < *expiry).then(|| token.clone())
    }

    pub(super) fn insert(
        &mut self,
        key: (String, String),
        token: String,
        expiry: Instant,
        now: Instant,
    ) {
        self.0.retain(|_, (_, expires)| *expires > now);
        if self.0.len() >= MAX_TOKENS && !self.0.contains_key(&key) {
            let soonest = self
                .0
                .iter()
                .min_by_key(|(_, (_, expires))| *expires)
                .map(|(k, _)| k.clone());
            if let Some(soonest) = soonest {
                self.0.remove(&soonest);
            }
        }
        self.0.insert(key, (token, expiry));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key(n: usize) -> (String, String) {
        ("r.example.com".into(), format!("repo{n}"))
    }

    #[test]
    fn expired_tokens_are_dropped_and_at_most_the_bound_is_kept() {
        let now = Instant::now();
        let mut tokens = Tokens::default();
        tokens.insert(key(0), "old".into(), now, now);
        let later = now + Duration::from_secs(1);
        for n in 1..=MAX_TOKENS + 10 {
            let expiry = later + Duration::from_secs(n as u64);
            tokens.insert(key(n), format!("t{n}"), expiry, later);
        }
        assert_eq!(tokens.0.len(), MAX_TOKENS);
        assert!(!tokens.0.contains_key(&key(0)), "the expired token is gone");
        assert!(
            !tokens.0.contains_key(&key(1)),
            "the soonest to expire went first"
        );
        let newest = MAX_TOKENS + 10;
        assert_eq!(
            tokens.get("r.example.com", &format!("repo{newest}"), later),
            Some(format!("t{newest}"))
        );
    }
}
