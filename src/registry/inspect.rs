//! Image inspection for platform placement: which platforms an image reference runs on, for many
//! pods at once, asking registries as little as possible: a digest's platforms cached for good, a
//! tag's digest per set of credentials, concurrent lookups shared, slots per namespace, each
//! lookup within `lookup_deadline`, a failing registry left alone for a growing delay; credentials
//! tried in the caller's order, as the kubelet does. docs/placement.md's "Caches, and what the
//! registry sees" states the rules.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use moka::future::Cache;
use sha2::{Digest as _, Sha256};
use tokio::sync::Semaphore;

use super::cache::{CacheOptions, Coalescing, Key};
use super::client::Registry;
use super::docker_config::{Credentials, DockerConfig};
use super::options::RegistryOptions;
use super::reference::{self, Reference};
use super::retry::{BackoffPolicy, Backoffs};
use crate::platform::Platform;

mod failure;
mod requests;

pub use failure::InspectError;

/// How the inspector is set up.
#[derive(Debug, Clone)]
pub struct InspectorOptions {
    /// How clients are built (plain-HTTP registries, CAs, timeouts, retries, size caps). Its
    /// credentials and cache lifetimes are not used: credentials come with each lookup, and
    /// caching is the inspector's.
    pub registry: RegistryOptions,
    /// Most digests whose platforms are kept.
    pub platforms_capacity: u64,
    /// Most tags whose digests are kept.
    pub tags_capacity: u64,
    /// Longest a tag's digest is kept, whatever lookups allow.
    pub tag_ttl_cap: Duration,
    /// Most registry lookups in flight at once.
    pub max_concurrent: usize,
    /// Most registry lookups in flight at once for the pods of one namespace.
    pub max_per_namespace: usize,
    /// Longest one lookup may take, waiting for a slot included.
    pub lookup_deadline: Duration,
    /// How long a failing registry is left alone.
    pub backoff: BackoffPolicy,
}

impl Default for InspectorOptions {
    fn default() -> Self {
        InspectorOptions {
            registry: RegistryOptions::default(),
            platforms_capacity: 10_000,
            tags_capacity: 10_000,
            tag_ttl_cap: Duration::from_secs(7 * 24 * 3600),
            max_concurrent: 8,
            max_per_namespace: 4,
            lookup_deadline: Duration::from_secs(30),
            backoff: BackoffPolicy::default(),
        }
    }
}

/// One image to inspect.
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    /// The image as a pod names it.
    pub image: &'a Reference,
    /// How old a cached digest of its tag may be (unused for references by digest).
    pub max_tag_age: Duration,
    /// Credentials to try, in order; anonymous when empty.
    pub credentials: &'a [Credentials],
    /// Whose lookup it is (the pod's namespace), for the slots per namespace.
    pub namespace: &'a str,
}

/// What an image runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// The digest the reference names now.
    pub digest: String,
    /// Its platforms, attestation and unknown entries left out.
    pub platforms: Arc<Vec<Platform>>,
}

/// Lookups answered from memory and lookups that went to a registry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InspectStats {
    pub tag_hits: u64,
    pub tag_misses: u64,
    pub platform_hits: u64,
    pub platform_misses: u64,
    /// Lookups refused because their registry was backing off.
    pub backed_off: u64,
}

/// A tag's digest, when it was resolved.
#[derive(Debug, Clone)]
struct Resolved {
    digest: String,
    at: Instant,
}

/// The inspector. Cheap to clone; clones share caches, clients and limits.
#[derive(Clone)]
pub struct Inspector {
    shared: Arc<Shared>,
}

/// Most clients kept (one per registry and credentials); the least recently used goes first.
const CLIENTS: u64 = 256;

struct Shared {
    template: RegistryOptions,
    clients: Cache<ClientKey, Registry>,
    tags: Coalescing<Resolved>,
    platforms: Coalescing<Arc<Vec<Platform>>>,
    limit: Semaphore,
    per_namespace: usize,
    namespaces: Mutex<HashMap<String, Arc<Semaphore>>>,
    deadline: Duration,
    backoffs: Mutex<Backoffs>,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    tag_hits: AtomicU64,
    tag_misses: AtomicU64,
    platform_hits: AtomicU64,
    platform_misses: AtomicU64,
    backed_off: AtomicU64,
}

/// A client per registry and credentials (a hash of them; `None`: anonymous).
type ClientKey = (String, Option<u128>);

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Inspector {
    /// Builds an inspector; no request is made until the first lookup.
    pub fn new(options: InspectorOptions) -> Self {
        let mut template = options.registry;
        // The clients' own tag cache would answer `Always` lookups with an old digest.
        template.cache = CacheOptions {
            tag_ttl: Duration::ZERO,
            not_found_ttl: Duration::ZERO,
            ..template.cache
        };
        template.credentials = DockerConfig::default();
        Inspector {
            shared: Arc::new(Shared {
                template,
                clients: Cache::new(CLIENTS),
                tags: Coalescing::new(
                    Cache::builder()
                        .max_capacity(options.tags_capacity)
                        .time_to_live(options.tag_ttl_cap)
                        .build(),
                ),
                platforms: Coalescing::new(
                    Cache::builder()
                        .max_capacity(options.platforms_capacity)
                        .build(),
                ),
                limit: Semaphore::new(options.max_concurrent.max(1)),
                per_namespace: options.max_per_namespace.max(1),
                namespaces: Mutex::default(),
                deadline: options.lookup_deadline,
                backoffs: Mutex::new(Backoffs::new(options.backoff)),
                counters: Counters::default(),
            }),
        }
    }

    /// Lookups so far, by where they were answered.
    pub fn stats(&self) -> InspectStats {
        let c = &self.shared.counters;
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        InspectStats {
            tag_hits: get(&c.tag_hits),
            tag_misses: get(&c.tag_misses),
            platform_hits: get(&c.platform_hits),
            platform_misses: get(&c.platform_misses),
            backed_off: get(&c.backed_off),
        }
    }

    /// The digest `lookup.image` names now and the platforms it runs on.
    pub async fn inspect(&self, lookup: Lookup<'_>) -> Result<ImageFacts, InspectError> {
        let deadline = Instant::now() + self.shared.deadline;
        let digest = match lookup.image.digest() {
            Some(digest) => digest.to_owned(),
            None => self.resolve(lookup, deadline).await?,
        };
        let platforms = self.platforms(lookup, &digest, deadline).await?;
        Ok(ImageFacts { digest, platforms })
    }

    async fn resolve(&self, lookup: Lookup<'_>, deadline: Instant) -> Result<String, InspectError> {
        let image = lookup.image;
        let key: Key = (
            scope(lookup.credentials),
            reference::api_host(image).to_owned(),
            image.repository().to_owned(),
            reference::manifest_reference(image).to_owned(),
        );
        let counters = &self.shared.counters;
        if let Some(resolved) = self.shared.tags.cache.get(&key).await {
            if resolved.at.elapsed() <= lookup.max_tag_age {
                counters.tag_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(resolved.digest);
            }
            self.shared.tags.cache.invalidate(&key).await;
        }
        self.check_backoff(image, lookup.credentials)?;
        let load = {
            let this = self.clone();
            let image = image.clone();
            let credentials = lookup.credentials.to_vec();
            let namespace = lookup.namespace.to_owned();
            async move {
                let digest = this
                    .with_credentials(
                        &image,
                        &credentials,
                        (&namespace, deadline),
                        |client, image| async move { client.resolve_digest(&image).await },
                    )
                    .await?;
                Ok(Resolved {
                    digest,
                    at: Instant::now(),
                })
            }
        };
        let resolved = self
            .shared
            .tags
            .get_or_load(
                key,
                (&counters.tag_hits, &counters.tag_misses),
                &reference::target(image),
                load,
            )
            .await?;
        Ok(resolved.digest)
    }

    async fn platforms(
        &self,
        lookup: Lookup<'_>,
        digest: &str,
        deadline: Instant,
    ) -> Result<Arc<Vec<Platform>>, InspectError> {
        let pinned = reference::at_digest(lookup.image, digest);
        // Content by digest is the same whoever reads it: one entry for every set of credentials.
        let key: Key = (
            0,
            reference::api_host(&pinned).to_owned(),
            pinned.repository().to_owned(),
            digest.to_owned(),
        );
        let counters = &self.shared.counters;
        if let Some(platforms) = self.shared.platforms.cache.get(&key).await {
            counters.platform_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(platforms);
        }
        self.check_backoff(&pinned, lookup.credentials)?;
        let load = {
            let this = self.clone();
            let pinned = pinned.clone();
            let credentials = lookup.credentials.to_vec();
            let namespace = lookup.namespace.to_owned();
            async move {
                let found = this
                    .with_credentials(
                        &pinned,
                        &credentials,
                        (&namespace, deadline),
                        |client, image| async move { client.image_platforms(&image).await },
                    )
                    .await?;
                Ok(Arc::new(found.platforms))
            }
        };
        Ok(self
            .shared
            .platforms
            .get_or_load(
                key,
                (&counters.platform_hits, &counters.platform_misses),
                &reference::target(&pinned),
                load,
            )
            .await?)
    }

    /// Whether the registry is being left alone for these credentials.
    fn check_backoff(
        &self,
        image: &Reference,
        credentials: &[Credentials],
    ) -> Result<(), InspectError> {
        let host = reference::api_host(image);
        let cooling = lock(&self.shared.backoffs).check(host, scope(credentials), Instant::now());
        match cooling {
            None => Ok(()),
            Some(cooling) => {
                self.shared
                    .counters
                    .backed_off
                    .fetch_add(1, Ordering::Relaxed);
                Err(InspectError::BackingOff {
                    registry: image.registry().to_owned(),
                    image: image.whole(),
                    retry_in: cooling.retry_in,
                    last_error: cooling.last_error,
                })
            }
        }
    }
}

/// A stable name for a list of credentials, for cache keys: never the secrets themselves.
fn scope(credentials: &[Credentials]) -> u128 {
    let mut hasher = Sha256::new();
    for credentials in credentials {
        hasher.update(credentials.fingerprint().to_be_bytes());
    }
    let digest = hasher.finalize();
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest[..16]);
    u128::from_be_bytes(first)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is one insert or remove: the map stays consistent after a panic.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the inspector knows of an image without asking its registry, and forgetting it: an image
/// that failed with `exec format error` on a node is inspected afresh for the next pod.
impl Inspector {
    /// The platforms cached for `image` at `digest`, if any (no registry request).
    pub async fn cached_platforms(
        &self,
        image: &Reference,
        digest: &str,
    ) -> Option<Arc<Vec<Platform>>> {
        let pinned = reference::at_digest(image, digest);
        let key = (
            0,
            reference::api_host(&pinned).to_owned(),
            pinned.repository().to_owned(),
            digest.to_owned(),
        );
        self.shared.platforms.cache.get(&key).await
    }

    /// Drops what is cached of `image`: its tag's digest for every set of credentials, and the
    /// platforms of `digests` (what ocifit inspected, what the node ran). Returns how many
    /// entries went.
    pub async fn forget(&self, image: &Reference, digests: &[&str]) -> usize {
        let host = reference::api_host(image).to_owned();
        let repository = image.repository().to_owned();
        let tag = reference::manifest_reference(image).to_owned();
        let tags: Vec<_> = self
            .shared
            .tags
            .cache
            .iter()
            .filter(|(key, _)| key.1 == host && key.2 == repository && key.3 == tag)
            .map(|(key, _)| key)
            .collect();
        let mut gone = 0;
        for key in tags {
            gone += usize::from(self.shared.tags.cache.remove(&*key).await.is_some());
        }
        for digest in digests {
            let key = (0, host.clone(), repository.clone(), (*digest).to_owned());
            gone += usize::from(self.shared.platforms.cache.remove(&key).await.is_some());
        }
        gone
    }
}
