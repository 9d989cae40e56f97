//! Everything a registry client can be told, read by the client (caches, read limits) and by
//! its transport (where requests may go, how long they take, how many run at once).

use std::time::Duration;

use super::addresses::PrivateRegistries;
use super::allow::AllowList;
use super::cache::CacheOptions;
use super::docker_config::DockerConfig;
use super::mirrors::Mirrors;
use super::restart::Restarts;
use super::retry::RetryPolicy;

/// Everything the client can be told. `Default` is anonymous HTTPS with the documented limits.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Registries (`host[:port]`, exactly as in references) reached over plain HTTP. Only
    /// registries named here; every other one is HTTPS.
    pub plain_http: Vec<String>,
    /// The registries that may be reached (`--allowed-registries`); empty allows every one.
    pub allowed: AllowList,
    /// The hosts and networks inside a network that may be reached
    /// (`--allowed-private-registries`); empty (the default) allows none.
    pub private: PrivateRegistries,
    /// Credentials, matched per image as the kubelet matches them.
    pub credentials: DockerConfig,
    /// The hosts each registry's reads go to first (`--registry-mirrors-dir`); empty: none.
    pub mirrors: Mirrors,
    /// Extra trusted CA certificates (PEM bundles), added to the system roots.
    pub extra_ca_pem: Vec<Vec<u8>>,
    /// Limit for one whole request (connect, headers and body).
    pub request_timeout: Duration,
    /// Limit for establishing a connection.
    pub connect_timeout: Duration,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Tries of a push or pull that broke off mid-transfer, each started again whole (a blob
    /// download resumes where it stopped).
    pub restarts: Restarts,
    /// Most registry requests in flight at once, over every client made from this one (a policy
    /// naming many images waits for permits rather than opening as many connections).
    pub max_concurrent_requests: usize,
    /// Largest compatibility artifact layer read.
    pub max_artifact_bytes: u64,
    /// Largest manifest, index or image config read.
    pub max_manifest_bytes: u64,
    /// Cache lifetimes and size.
    pub cache: CacheOptions,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            plain_http: Vec::new(),
            allowed: AllowList::default(),
            private: PrivateRegistries::default(),
            credentials: DockerConfig::default(),
            mirrors: Mirrors::default(),
            extra_ca_pem: Vec::new(),
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            retry: RetryPolicy::default(),
            restarts: Restarts::default(),
            max_concurrent_requests: 16,
            max_artifact_bytes: 1024 * 1024,
            max_manifest_bytes: 4 * 1024 * 1024,
            cache: CacheOptions::default(),
        }
    }
}
