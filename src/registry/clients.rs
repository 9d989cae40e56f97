//! Registry clients by credential source: the default one (anonymous, or the operator's own
//! docker config) and one per named source (a pull Secret), all made from one root so they share
//! one content cache bounded in bytes, connections, the request bound and counters. A source's
//! client is replaced when its version changes, and dropped when unused for a while or when
//! there are too many, so the clients of deleted Secrets and policies do not pile up.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::client::Registry;
use super::docker_config::DockerConfig;
use super::error::{ConfigError, Result};
use super::options::RegistryOptions;
use super::stats::RegistryStats;

/// The clients of one process.
pub struct Clients {
    default: Registry,
    named: Mutex<HashMap<String, Named>>,
    capacity: usize,
    idle: Duration,
}

struct Named {
    version: String,
    client: Registry,
    used: Instant,
}

impl Clients {
    /// The default client from `options` (its credentials serve requests without a source);
    /// named clients get the same options with their own credentials.
    pub fn new(options: RegistryOptions) -> Result<Clients> {
        let (capacity, idle) = (options.cache.clients_capacity, options.cache.clients_idle);
        Ok(Clients {
            default: Registry::new(options)?,
            named: Mutex::default(),
            capacity: capacity.max(1),
            idle,
        })
    }

    /// The client for requests without named credentials.
    pub fn default_client(&self) -> Registry {
        self.default.clone()
    }

    /// The client for the credentials `name` holds at `version` (a Secret's `namespace/name` and
    /// resourceVersion): the one kept for it, or one made with `credentials()` when there is none
    /// or it was made from another version.
    pub fn named(
        &self,
        name: &str,
        version: &str,
        credentials: impl FnOnce() -> Result<DockerConfig, ConfigError>,
    ) -> Result<Registry, ConfigError> {
        let now = Instant::now();
        let mut named = self.named.lock().unwrap_or_else(PoisonError::into_inner);
        named.retain(|_, n| now.duration_since(n.used) < self.idle);
        if let Some(kept) = named.get_mut(name).filter(|n| n.version == version) {
            kept.used = now;
            return Ok(kept.client.clone());
        }
        let client = self.default.with_credentials(credentials()?);
        if named.len() >= self.capacity && !named.contains_key(name) {
            let least_recent = named
                .iter()
                .min_by_key(|(_, n)| n.used)
                .map(|(k, _)| k.clone());
            if let Some(least_recent) = least_recent {
                named.remove(&least_recent);
            }
        }
        named.insert(
            name.to_owned(),
            Named {
                version: version.to_owned(),
                client: client.clone(),
                used: now,
            },
        );
        Ok(client)
    }

    /// Request and cache counters over every client.
    pub fn stats(&self) -> RegistryStats {
        self.default.stats()
    }

    #[cfg(test)]
    fn kept(&self) -> Vec<(String, String)> {
        let named = self.named.lock().unwrap_or_else(PoisonError::into_inner);
        let mut kept: Vec<_> = named
            .iter()
            .map(|(k, n)| (k.clone(), n.version.clone()))
            .collect();
        kept.sort();
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::CacheOptions;

    fn clients(capacity: usize, idle: Duration) -> Clients {
        Clients::new(RegistryOptions {
            cache: CacheOptions {
                clients_capacity: capacity,
                clients_idle: idle,
                ..CacheOptions::default()
            },
            ..RegistryOptions::default()
        })
        .unwrap()
    }

    fn config() -> Result<DockerConfig, ConfigError> {
        DockerConfig::from_json(br#"{"auths":{}}"#)
    }

    #[test]
    fn a_source_keeps_its_client_until_its_version_changes() {
        let clients = clients(8, Duration::from_secs(60));
        clients.named("ns/a", "1", config).unwrap();
        let mut built = false;
        clients
            .named("ns/a", "1", || {
                built = true;
                config()
            })
            .unwrap();
        assert!(!built, "the kept client is reused");
        clients.named("ns/a", "2", config).unwrap();
        assert_eq!(clients.kept(), [("ns/a".to_string(), "2".to_string())]);
    }

    #[test]
    fn unused_clients_are_dropped_after_the_idle_time() {
        let clients = clients(8, Duration::from_millis(50));
        clients.named("ns/gone", "1", config).unwrap();
        std::thread::sleep(Duration::from_millis(80));
        clients.named("ns/live", "1", config).unwrap();
        assert_eq!(clients.kept(), [("ns/live".to_string(), "1".to_string())]);
    }

    #[test]
    fn at_capacity_the_least_recently_used_client_goes() {
        let clients = clients(2, Duration::from_secs(60));
        clients.named("ns/a", "1", config).unwrap();
        clients.named("ns/b", "1", config).unwrap();
        clients.named("ns/a", "1", config).unwrap();
        clients.named("ns/c", "1", config).unwrap();
        let names: Vec<String> = clients.kept().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["ns/a", "ns/c"]);
    }

    #[test]
    fn credentials_that_do_not_parse_are_an_error_and_nothing_is_kept() {
        let clients = clients(8, Duration::from_secs(60));
        let err = clients
            .named("ns/bad", "1", || DockerConfig::from_json(b"not json"))
            .unwrap_err();
        assert!(err.to_string().contains("invalid docker config"), "{err}");
        assert!(clients.kept().is_empty());
    }
}
