//! The registry client: what the controller and `ocifit resolve` call. It resolves references,
//! fetches verified manifests and blobs through the caches, and leaves every decision (which
//! layer, which referrer, which platforms) to the pure modules beside it.
//! [`Registry::resolve_artifact`] fetches and parses in one call: the bytes come verified from the
//! registry, and the engine parses them once, at the very end.

use std::sync::Arc;

use super::cache::Caches;
use super::docker_config::DockerConfig;
use super::error::{ContentProblem, Error, ErrorKind, Result};
use super::fetch::Inner;
use super::manifest::choose_layer;
use super::manifest::newest_nfd_referrer;
use super::manifest::{Descriptor, ImageManifest, Manifest, is_index_media_type};
use super::options::RegistryOptions;
use super::platforms::{self, ImagePlatforms};
use super::reference::{self, Reference};
use super::stats::RegistryStats;
use super::transport::Transport;
use crate::engine::{Artifact, ArtifactError, Format};
use crate::platform::Platform;

/// How deep nested image indexes are followed.
const MAX_INDEX_DEPTH: usize = 4;
/// Most index entries read for one image, nested indexes included. A multi-platform image lists
/// a few dozen (platforms and their attestations); more would make one lookup many requests.
const MAX_INDEX_ENTRIES: usize = 256;

/// Image config media types whose blob names a platform.
const IMAGE_CONFIG_TYPES: [&str; 2] = [
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];

/// A compatibility artifact's verified bytes, before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedArtifact {
    /// The reference it was fetched by.
    pub reference: String,
    /// The artifact manifest's digest.
    pub digest: String,
    /// Which format the layer holds (by media type).
    pub format: Format,
    /// The layer's media type.
    pub media_type: String,
    /// The layer's content, digest-verified and within the size cap.
    pub content: Vec<u8>,
}

/// A registry client with its caches. Cheap to clone; clones share caches and connections.
/// One client holds one set of credentials: [`Registry::with_credentials`] makes one for other
/// credentials that shares the caches, connections, request bound and counters.
#[derive(Clone)]
pub struct Registry {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// Builds a client; fails only on unusable TLS configuration.
    pub fn new(options: RegistryOptions) -> Result<Self> {
        let transport = Transport::new(&options)?;
        Ok(Registry {
            inner: Arc::new(Inner {
                counters: transport.counters(),
                transport,
                caches: Arc::new(Caches::new(&options.cache)),
                max_artifact_bytes: options.max_artifact_bytes,
                max_manifest_bytes: options.max_manifest_bytes,
                restarts: options.restarts,
            }),
        })
    }

    /// A client with other credentials sharing this one's caches (bounded in bytes over all of
    /// them; entries are scoped by credentials, so neither reads what only the other may),
    /// connections, request bound, allowed registries and counters.
    pub fn with_credentials(&self, credentials: DockerConfig) -> Registry {
        let inner = &self.inner;
        Registry {
            inner: Arc::new(Inner {
                transport: inner.transport.with_credentials(credentials),
                caches: Arc::clone(&inner.caches),
                counters: Arc::clone(&inner.counters),
                max_artifact_bytes: inner.max_artifact_bytes,
                max_manifest_bytes: inner.max_manifest_bytes,
                restarts: inner.restarts,
            }),
        }
    }

    /// Request and cache counters since the root client was built, over every client made from
    /// it with [`Registry::with_credentials`].
    pub fn stats(&self) -> RegistryStats {
        self.inner.counters.snapshot()
    }

    /// How often a push or pull that broke off is tried (see [`super::restarting`]).
    pub fn restarts(&self) -> super::Restarts {
        self.inner.restarts
    }

    /// Bytes of blobs streamed either way so far, over every client of the root: what a command
    /// line shows as its transfer's progress.
    pub fn streamed_bytes(&self) -> u64 {
        self.inner
            .counters
            .streamed_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The digest a reference names now: its own digest, or what its tag points at (cached for
    /// the tag TTL; a missing tag for the not-found TTL).
    pub async fn resolve_digest(&self, reference: &Reference) -> Result<String> {
        Inner::resolve_digest(&self.inner, reference).await
    }

    /// Fetches a compatibility artifact by tag or digest: the manifest, its one compatibility
    /// layer (chosen by media type), size-capped and digest-verified.
    pub async fn fetch_artifact(&self, reference: &Reference) -> Result<FetchedArtifact> {
        let digest = self.resolve_digest(reference).await?;
        let pinned = reference::at_digest(reference, &digest);
        // Failures below are reported against what the user asked for, with the digest.
        let mut asked = reference::target(&pinned);
        if let (None, Some(tag)) = (reference.digest(), reference.tag()) {
            asked.reference = format!("{tag}@{digest}");
        }
        let manifest = match Inner::manifest(&self.inner, &pinned).await {
            Ok(Manifest::Image(manifest)) => manifest,
            Ok(Manifest::Index(_)) => {
                return Err(Error::content(&asked, ContentProblem::UnexpectedIndex));
            }
            Err(err) => return Err(err.about(&asked)),
        };
        let chosen = choose_layer(&manifest).map_err(|problem| Error::content(&asked, problem))?;
        let limit = self.inner.max_artifact_bytes;
        let content = Inner::blob(&self.inner, &pinned, &chosen.layer, limit)
            .await
            .map_err(|err| err.about(&asked))?;
        Ok(FetchedArtifact {
            reference: reference.whole(),
            digest,
            format: chosen.format,
            media_type: chosen.layer.media_type,
            content: content.to_vec(),
        })
    }

    /// Finds an image's NFD compatibility artifact: the newest referrer with the NFD
    /// artifactType (referrers API, else the `sha256-<hex>` tag), then fetches it.
    pub async fn find_nfd_artifact(&self, image: &Reference) -> Result<FetchedArtifact> {
        let subject = self.resolve_digest(image).await?;
        let referrers = Inner::referrers(&self.inner, image, &subject).await?;
        let Some(chosen) = newest_nfd_referrer(&referrers) else {
            return Err(Error::NotFound {
                target: reference::target(&reference::at_digest(image, &subject)),
                what: "NFD compatibility artifact referring to the image",
            });
        };
        self.fetch_artifact(&reference::at_digest(image, &chosen.digest))
            .await
    }

    /// The platforms an image is built for: every entry of its index (nested indexes followed),
    /// or its config blob when it is a single-platform image.
    pub async fn image_platforms(&self, image: &Reference) -> Result<ImagePlatforms> {
        let digest = self.resolve_digest(image).await?;
        let mut found = Vec::new();
        let mut entries = 0;
        let mut pending: Vec<(String, usize)> = vec![(digest.clone(), 0)];
        while let Some((at, depth)) = pending.pop() {
            let pinned = reference::at_digest(image, &at);
            let target = reference::target(&pinned);
            match Inner::manifest(&self.inner, &pinned).await? {
                Manifest::Index(index) => {
                    if depth >= MAX_INDEX_DEPTH {
                        return Err(Error::content(
                            &target,
                            ContentProblem::TooDeep(MAX_INDEX_DEPTH),
                        ));
                    }
                    entries += index.manifests.len();
                    if entries > MAX_INDEX_ENTRIES {
                        return Err(Error::content(
                            &target,
                            ContentProblem::TooManyEntries(MAX_INDEX_ENTRIES),
                        ));
                    }
                    let plan = platforms::plan_index(&index);
                    found.extend(plan.platforms);
                    for entry in plan.follow.iter().rev() {
                        if is_index_media_type(&entry.media_type) {
                            pending.push((entry.digest.clone(), depth + 1));
                        } else if let Some(platform) = self.entry_platform(image, entry).await? {
                            found.push(platform);
                        }
                    }
                }
                Manifest::Image(manifest) => {
                    let platform = self.config_platform(&pinned, &manifest).await?;
                    found.push(
                        platform
                            .ok_or_else(|| Error::content(&target, ContentProblem::NoPlatform))?,
                    );
                }
            }
        }
        Ok(ImagePlatforms {
            digest,
            platforms: platforms::dedupe(found),
        })
    }

    /// [`Registry::image_platforms`], remembered: during an outage (the registry unreachable or
    /// rate limiting) the platforms last read for the image, when there are any. Kept in a cache
    /// bounded in entries, dropped when not asked for (`CacheOptions::known_platforms_*`).
    pub async fn image_platforms_or_last_known(&self, image: &Reference) -> Result<ImagePlatforms> {
        let key = self.inner.key(image, reference::manifest_reference(image));
        let known = &self.inner.caches.known_platforms;
        match self.image_platforms(image).await {
            Ok(found) => {
                known.insert(key, found.clone()).await;
                Ok(found)
            }
            Err(err) if matches!(err.kind(), ErrorKind::Transport | ErrorKind::RateLimited) => {
                known.get(&key).await.ok_or(err)
            }
            Err(err) => Err(err),
        }
    }

    /// The platform of an index entry that names none: read from its config, if it is an image.
    async fn entry_platform(
        &self,
        image: &Reference,
        entry: &Descriptor,
    ) -> Result<Option<Platform>> {
        let pinned = reference::at_digest(image, &entry.digest);
        match Inner::manifest(&self.inner, &pinned).await? {
            Manifest::Image(manifest) => self.config_platform(&pinned, &manifest).await,
            Manifest::Index(_) => Ok(None),
        }
    }

    async fn config_platform(
        &self,
        pinned: &Reference,
        manifest: &ImageManifest,
    ) -> Result<Option<Platform>> {
        if !IMAGE_CONFIG_TYPES.contains(&manifest.config.media_type.as_str()) {
            return Ok(None);
        }
        let limit = self.inner.max_manifest_bytes;
        let config = Inner::blob(&self.inner, pinned, &manifest.config, limit).await?;
        platforms::platform_from_config(&config)
            .map_err(|problem| Error::content(&reference::target(pinned), problem))
    }
}

/// A compatibility artifact read from a registry and parsed.
#[derive(Debug)]
pub struct ResolvedArtifact {
    /// The reference it was fetched by.
    pub reference: String,
    /// The artifact manifest's digest.
    pub digest: String,
    /// The format, from the layer's media type.
    pub format: Format,
    /// The parsed artifact.
    pub artifact: Artifact,
}

/// Why an artifact could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// It could not be fetched (see [`Error::kind`]).
    #[error(transparent)]
    Registry(#[from] Error),
    /// It was fetched but is not a valid compatibility document: where and why.
    #[error("invalid {format} compatibility artifact {reference} ({digest}): {source}")]
    Artifact {
        reference: String,
        digest: String,
        format: Format,
        #[source]
        source: ArtifactError,
    },
}

impl ResolveError {
    /// The class of this failure; an unparsable artifact is invalid content.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ResolveError::Registry(err) => err.kind(),
            ResolveError::Artifact { .. } => ErrorKind::InvalidContent,
        }
    }
}

impl Registry {
    /// Fetches the artifact `reference` names and parses it in the format its media type says.
    pub async fn resolve_artifact(
        &self,
        reference: &Reference,
    ) -> Result<ResolvedArtifact, ResolveError> {
        parse(self.fetch_artifact(reference).await?)
    }

    /// Finds an image's attached NFD artifact (newest referrer) and parses it.
    pub async fn resolve_nfd_artifact(
        &self,
        image: &Reference,
    ) -> Result<ResolvedArtifact, ResolveError> {
        parse(self.find_nfd_artifact(image).await?)
    }
}

fn parse(fetched: FetchedArtifact) -> Result<ResolvedArtifact, ResolveError> {
    match Artifact::parse(fetched.format, &fetched.content) {
        Ok(artifact) => Ok(ResolvedArtifact {
            reference: fetched.reference,
            digest: fetched.digest,
            format: fetched.format,
            artifact,
        }),
        Err(source) => Err(ResolveError::Artifact {
            reference: fetched.reference,
            digest: fetched.digest,
            format: fetched.format,
            source,
        }),
    }
}
