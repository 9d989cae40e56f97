//! Image inspection for platform placement: which platforms an image reference runs on, for many
//! pods at once, asking registries as little as possible.
//!
//! - A digest's platforms are cached for good (bounded by entries): content by digest never
//!   changes, so every pod naming it, whatever its credentials, is answered from memory.
//! - A tag's digest is cached per set of credentials (one pod's lookup never answers another's
//!   with credentials it lacks), and trusted for as long as each lookup allows: long for
//!   `IfNotPresent` containers, not at all for `Always`.
//! - Concurrent lookups of one tag or digest share one request; at most `max_concurrent` requests
//!   run at once, and at most `max_per_namespace` for the pods of one namespace, so one tenant's
//!   stalled registry cannot take every slot; a registry that fails as a whole is left alone for
//!   a growing delay.
//! - A lookup (its tag, every index entry, every retry, and the wait for a slot) ends within
//!   `lookup_deadline`: a registry that accepts connections and never answers holds a slot for
//!   that long at most, and the pod's failed attempt counts toward its policy's bound.
//! - Credentials are tried in the caller's order, the next after a refusal, as the kubelet does;
//!   anonymous when there are none.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use moka::future::Cache;
use sha2::{Digest as _, Sha256};
use tokio::sync::Semaphore;

use super::backoff::{BackoffPolicy, Backoffs};
use super::cache::{CacheOptions, Coalescing, Key};
use super::client::{Registry, RegistryOptions};
use super::docker_config::{Credentials, DockerConfig};
use super::error::{Error, ErrorKind};
use super::reference::{self, Reference};
use crate::platform::Platform;

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
    /// Whether registries on private, loopback or link-local addresses may be asked. Off: each
    /// registry's name is resolved before the first request and refused when any of its
    /// addresses is one.
    pub private_addresses: bool,
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
            private_addresses: false,
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

/// Why an image could not be inspected.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InspectError {
    /// The registry answered with an error, or could not be reached.
    #[error(transparent)]
    Registry(#[from] Error),
    /// The registry failed recently and is being left alone.
    #[error(
        "not asking {registry} about {image} for another {}s: it failed recently ({last_error})",
        retry_in.as_secs().max(1)
    )]
    BackingOff {
        registry: String,
        image: String,
        retry_in: Duration,
        last_error: String,
    },
}

impl InspectError {
    /// The kind of failure as a metric label: the registry error's kind, or `backing_off`.
    pub fn kind_label(&self) -> &'static str {
        match self {
            InspectError::Registry(error) => error.kind().as_str(),
            InspectError::BackingOff { .. } => "backing_off",
        }
    }

    /// What went wrong, in words safe to show whoever reads the pod's Events and annotations:
    /// the kind of failure, never the registry's own text, an address it redirected to or
    /// resolved to, or a response body (ocifit's log has the whole error).
    pub fn summary(&self) -> String {
        let error = match self {
            InspectError::BackingOff { retry_in, .. } => {
                return format!(
                    "not asked: its registry failed recently (next try in {}s)",
                    retry_in.as_secs().max(1)
                );
            }
            InspectError::Registry(error) => error,
        };
        match error {
            // The pod's own text, clipped.
            Error::InvalidReference { .. } => error.to_string(),
            Error::NotFound { what, .. } => format!("{what} not found"),
            Error::Unauthorized { .. } => {
                "unauthorized: the registry refused the pod's pull credentials (or anonymous access)"
                    .to_owned()
            }
            Error::RateLimited { .. } => "rate limited by the registry".to_owned(),
            Error::InvalidContent { .. } => {
                "the registry's answer is not a valid image manifest or index".to_owned()
            }
            Error::Transport { .. } => {
                "the registry could not be reached, failed, or did not answer in time".to_owned()
            }
            Error::Deadline {
                deadline,
                waiting_for_slot,
                ..
            } => format!(
                "{} within the lookup deadline of {}s",
                if *waiting_for_slot {
                    "no inspection slot was free"
                } else {
                    "no answer"
                },
                deadline.as_secs()
            ),
            Error::NotAllowed { why, .. } => format!("refused: {why}"),
            Error::Config(_) => {
                "ocifit's registry client configuration is unusable (see ocifit's log)".to_owned()
            }
        }
    }
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
    private_addresses: bool,
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
                private_addresses: options.private_addresses,
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
        self.check_backoff(image)?;
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
        self.check_backoff(&pinned)?;
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

    fn check_backoff(&self, image: &Reference) -> Result<(), InspectError> {
        let host = reference::api_host(image);
        let cooling = lock(&self.shared.backoffs).check(host, Instant::now());
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

    /// Runs `call` with each candidate's client in turn (anonymous when there is none) until one
    /// is not refused, within a slot of the namespace and one of the inspector and before the
    /// lookup's deadline, and records the registry's own outcome for its backoff (a lookup that
    /// never got a slot says nothing about the registry).
    async fn with_credentials<T, F, Fut>(
        &self,
        image: &Reference,
        credentials: &[Credentials],
        (namespace, deadline): (&str, Instant),
        call: F,
    ) -> Result<T, Error>
    where
        F: Fn(Registry, Reference) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let deadline = tokio::time::Instant::from_std(deadline);
        let slots = async {
            // A semaphore here is never closed; without a permit the call would still run.
            let own = self.namespace_slots(namespace).acquire_owned().await.ok();
            let shared = self.shared.limit.acquire().await.ok();
            (own, shared)
        };
        let Ok(_permits) = tokio::time::timeout_at(deadline, slots).await else {
            return Err(Error::Deadline {
                target: reference::target(image),
                deadline: self.shared.deadline,
                waiting_for_slot: true,
            });
        };
        let candidates: Vec<Option<&Credentials>> = if credentials.is_empty() {
            vec![None]
        } else {
            credentials.iter().map(Some).collect()
        };
        let calls = async {
            if !self.shared.private_addresses {
                refuse_private(image).await?;
            }
            let mut result = Err(Error::NotFound {
                target: reference::target(image),
                what: "credentials",
            });
            for candidate in candidates {
                let client = self.client(image.registry(), candidate).await?;
                result = call(client, image.clone()).await;
                match &result {
                    Err(err) if err.kind() == ErrorKind::Unauthorized => continue,
                    _ => break,
                }
            }
            result
        };
        let result = tokio::time::timeout_at(deadline, calls)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Deadline {
                    target: reference::target(image),
                    deadline: self.shared.deadline,
                    waiting_for_slot: false,
                })
            });
        let host = reference::api_host(image);
        lock(&self.shared.backoffs).record(host, result.as_ref().map(|_| ()), Instant::now());
        result
    }

    /// The slots of `namespace`'s lookups. Namespaces with none in flight are dropped as others
    /// come (a held permit keeps its semaphore referenced), so the map holds the active ones.
    fn namespace_slots(&self, namespace: &str) -> Arc<Semaphore> {
        let mut namespaces = lock(&self.shared.namespaces);
        if let Some(slots) = namespaces.get(namespace) {
            return Arc::clone(slots);
        }
        namespaces.retain(|_, slots| Arc::strong_count(slots) > 1);
        let slots = Arc::new(Semaphore::new(self.shared.per_namespace));
        namespaces.insert(namespace.to_owned(), Arc::clone(&slots));
        slots
    }

    async fn client(
        &self,
        registry: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Registry, Error> {
        let key: ClientKey = (
            registry.to_owned(),
            credentials.map(Credentials::fingerprint),
        );
        let build = async {
            let mut options = self.shared.template.clone();
            if let Some(credentials) = credentials {
                options.credentials = DockerConfig::for_registry(registry, credentials.clone());
            }
            Registry::new(options)
        };
        self.shared
            .clients
            .try_get_with(key, build)
            .await
            .map_err(|err| Error::clone(&err))
    }
}

/// Refuses `image`'s registry when its name is, or resolves to, an address that is not public.
/// A name that does not resolve is left to the request itself to fail.
pub async fn refuse_private(image: &Reference) -> Result<(), Error> {
    let host = reference::api_host(image);
    let has_port = !host.ends_with(']')
        && host
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok());
    let authority = if has_port {
        host.to_owned()
    } else {
        format!("{host}:443")
    };
    let Ok(addresses) = tokio::net::lookup_host(authority).await else {
        return Ok(());
    };
    let mut addresses = addresses;
    if addresses.any(|address| not_public(address.ip())) {
        return Err(Error::NotAllowed {
            target: reference::target(image),
            host: host.to_owned(),
            why: super::error::Refusal::PrivateAddress,
        });
    }
    Ok(())
}

/// Private (RFC 1918, unique local), loopback, link-local, shared (100.64/10), unspecified or
/// broadcast: an address inside the cluster's or the node's own network.
fn not_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let [first, second, ..] = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || first == 0
                || (first == 100 && (second & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| not_public(IpAddr::V4(v4)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Refusal, Target};

    fn target() -> Target {
        Target {
            registry: "registry.tenant.example".into(),
            repository: "app".into(),
            reference: "v1".into(),
        }
    }

    #[test]
    fn private_loopback_and_link_local_addresses_are_not_public_and_others_are() {
        for address in [
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(not_public(address.parse().unwrap()), "{address}");
        }
        for address in [
            "93.184.216.34",
            "192.0.2.2",
            "2606:4700::1111",
            "100.128.0.1",
        ] {
            assert!(!not_public(address.parse().unwrap()), "{address}");
        }
    }

    #[test]
    fn a_summary_names_the_kind_of_failure_and_never_what_the_registry_or_network_said() {
        let internal = [
            Error::Transport {
                target: target(),
                detail: "error sending request for url (http://10.96.0.12:5000/v2/): \
                         connection refused"
                    .into(),
                source: None,
            },
            Error::NotAllowed {
                target: target(),
                host: "metadata.internal:80".into(),
                why: Refusal::RedirectHost,
            },
            Error::Deadline {
                target: target(),
                deadline: Duration::from_secs(30),
                waiting_for_slot: false,
            },
        ];
        for error in internal {
            let summary = InspectError::Registry(error.clone()).summary();
            for secret in ["10.96.0.12", "metadata.internal", "connection refused"] {
                assert!(!summary.contains(secret), "{summary:?} from {error}");
            }
        }
        let cooling = InspectError::BackingOff {
            registry: "registry.tenant.example".into(),
            image: "registry.tenant.example/app:v1".into(),
            retry_in: Duration::from_secs(4),
            last_error: "error sending request for url (http://10.96.0.12:5000/v2/)".into(),
        };
        assert_eq!(
            cooling.summary(),
            "not asked: its registry failed recently (next try in 4s)"
        );
        assert_eq!(
            InspectError::Registry(Error::Deadline {
                target: target(),
                deadline: Duration::from_secs(30),
                waiting_for_slot: true,
            })
            .summary(),
            "no inspection slot was free within the lookup deadline of 30s"
        );
        assert_eq!(
            InspectError::Registry(Error::NotFound {
                target: target(),
                what: "tag",
            })
            .summary(),
            "tag not found"
        );
    }

    #[test]
    fn a_failure_is_labelled_by_its_kind_for_the_metrics() {
        let refused = InspectError::Registry(Error::Transport {
            target: target(),
            detail: "connection refused".into(),
            source: None,
        });
        assert_eq!(refused.kind_label(), "transport");
        let missing = InspectError::Registry(Error::NotFound {
            target: target(),
            what: "tag",
        });
        assert_eq!(missing.kind_label(), "not_found");
        let cooling = InspectError::BackingOff {
            registry: "registry.tenant.example".into(),
            image: "registry.tenant.example/app:v1".into(),
            retry_in: Duration::from_secs(4),
            last_error: String::new(),
        };
        assert_eq!(cooling.kind_label(), "backing_off");
    }
}
