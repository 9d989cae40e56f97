//! Fetching through the caches: tag resolution, manifests and blobs by digest (verified and
//! size-capped), and an image's referrers (the API, or the tag scheme). Used by `client`; the
//! choices made with what is fetched live in the pure modules.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::cache::{Caches, Content, Key, TagEntry};
use super::error::{Access, ContentProblem, Error, Result, Target};
use super::manifest::{self, Descriptor, MANIFEST_ACCEPT, Manifest, OCI_INDEX};
use super::mirrors::Need;
use super::reference::{self, Reference};
use super::stats::Counters;
use super::transport::{Request, Transport};
use crate::engine::NFD_ARTIFACT_TYPE;

/// What a `Registry` shares between its clones and its spawned loads.
pub(crate) struct Inner {
    pub transport: Transport,
    /// Shared with every client made from the same root (keys carry the credentials' scope).
    pub caches: Arc<Caches>,
    pub counters: Arc<Counters>,
    pub max_artifact_bytes: u64,
    pub max_manifest_bytes: u64,
    pub restarts: super::retry::Restarts,
}

impl Inner {
    /// The cache key of `reference` at `at`, scoped by the credentials this client presents there.
    pub(crate) fn key(&self, reference: &Reference, at: &str) -> Key {
        (
            self.transport
                .scope(reference.registry(), reference.repository()),
            reference::api_host(reference).to_string(),
            reference.repository().to_string(),
            at.to_string(),
        )
    }

    fn counters(&self, of: fn(&Counters) -> (&AtomicU64, &AtomicU64)) -> (&AtomicU64, &AtomicU64) {
        of(&self.counters)
    }

    pub(crate) async fn resolve_digest(this: &Arc<Self>, reference: &Reference) -> Result<String> {
        if let Some(digest) = reference.digest() {
            return Ok(digest.to_string());
        }
        let tag = reference::manifest_reference(reference).to_string();
        let target = reference::target(reference);
        let load = {
            let this = Arc::clone(this);
            let reference = reference.clone();
            async move { this.resolve_tag(&reference).await }
        };
        let counters = this.counters(|c| (&c.tag_hits, &c.tag_misses));
        match this
            .caches
            .tags
            .get_or_load(this.key(reference, &tag), counters, &target, load)
            .await?
        {
            TagEntry::Digest(digest) => Ok(digest),
            TagEntry::Missing => Err(Error::NotFound {
                target,
                what: "tag",
            }),
        }
    }

    /// Asks the registry what a tag points at: HEAD (which Docker Hub does not count as a pull),
    /// or GET when the registry sends no digest header.
    async fn resolve_tag(&self, reference: &Reference) -> Result<TagEntry> {
        let target = reference::target(reference);
        let head = self.manifest_request(reference, &target, true);
        let answer = match self.transport.fetch(&head).await {
            Err(Error::NotFound { .. }) => return Ok(TagEntry::Missing),
            other => other?,
        };
        if let Some(digest) = answer.digest.filter(|d| manifest::is_valid_digest(d)) {
            return Ok(TagEntry::Digest(digest));
        }
        let get = self.manifest_request(reference, &target, false);
        let answer = match self.transport.fetch(&get).await {
            Err(Error::NotFound { .. }) => return Ok(TagEntry::Missing),
            other => other?,
        };
        let digest = match answer.digest.filter(|d| manifest::is_valid_digest(d)) {
            Some(digest) => {
                manifest::verify_digest(&digest, &answer.body)
                    .map_err(|p| Error::content(&target, p))?;
                digest
            }
            None => manifest::sha256_digest(&answer.body),
        };
        let content = Content {
            body: answer.body,
            content_type: answer.content_type,
        };
        self.caches
            .content
            .cache
            .insert(self.key(reference, &digest), content)
            .await;
        Ok(TagEntry::Digest(digest))
    }

    fn manifest_request<'a>(
        &self,
        reference: &'a Reference,
        target: &'a Target,
        head: bool,
    ) -> Request<'a> {
        let at = reference::manifest_reference(reference);
        Request {
            target,
            host: reference::api_host(reference),
            path: format!("/v2/{}/manifests/{at}", reference.repository()),
            accept: &MANIFEST_ACCEPT,
            head,
            limit: self.max_manifest_bytes,
            what: "manifest",
            access: Access::Read,
            // Content by digest is verified; a tag's answer is believed, so only a host
            // trusted to resolve is asked.
            need: if manifest::is_valid_digest(at) {
                Need::Pull
            } else {
                Need::Resolve
            },
        }
    }

    /// Fetches `request`, keeping its body only if it hashes to `digest`: content named by a
    /// digest is never cached unverified.
    async fn fetch_verified(&self, request: &Request<'_>, digest: &str) -> Result<Content> {
        let answer = self.transport.fetch(request).await?;
        manifest::verify_digest(digest, &answer.body)
            .map_err(|p| Error::content(request.target, p))?;
        Ok(Content {
            body: answer.body,
            content_type: answer.content_type,
        })
    }

    /// A manifest by digest, verified, through the content cache.
    pub(crate) async fn manifest(this: &Arc<Self>, pinned: &Reference) -> Result<Manifest> {
        let target = reference::target(pinned);
        let digest = reference::manifest_reference(pinned).to_string();
        // Digests also come from registry content (index entries, referrers): never let one
        // that is not a digest into a URL.
        if !manifest::is_valid_digest(&digest) {
            return Err(Error::content(
                &target,
                ContentProblem::UnsupportedDigest(digest),
            ));
        }
        let load = {
            let this = Arc::clone(this);
            let pinned = pinned.clone();
            let target = target.clone();
            let digest = digest.clone();
            async move {
                this.fetch_verified(&this.manifest_request(&pinned, &target, false), &digest)
                    .await
            }
        };
        let counters = this.counters(|c| (&c.content_hits, &c.content_misses));
        let content = this
            .caches
            .content
            .get_or_load(this.key(pinned, &digest), counters, &target, load)
            .await?;
        Manifest::parse(&content.body, content.content_type.as_deref())
            .map_err(|p| Error::content(&target, p))
    }

    /// A blob by descriptor, size-capped and verified, through the content cache.
    pub(crate) async fn blob(
        this: &Arc<Self>,
        image: &Reference,
        descriptor: &Descriptor,
        limit: u64,
    ) -> Result<bytes::Bytes> {
        let pinned = reference::at_digest(image, &descriptor.digest);
        let target = reference::target(&pinned);
        let too_large = || Error::content(&target, ContentProblem::TooLarge { limit });
        if !manifest::is_valid_digest(&descriptor.digest) {
            return Err(Error::content(
                &target,
                ContentProblem::UnsupportedDigest(descriptor.digest.clone()),
            ));
        }
        if u64::try_from(descriptor.size).is_ok_and(|size| size > limit) {
            return Err(too_large());
        }
        let load = {
            let this = Arc::clone(this);
            let target = target.clone();
            let digest = descriptor.digest.clone();
            let host = reference::api_host(image).to_string();
            let path = format!("/v2/{}/blobs/{}", image.repository(), digest);
            async move {
                let request = Request {
                    target: &target,
                    host: &host,
                    path,
                    accept: &["*/*"],
                    head: false,
                    limit,
                    what: "blob",
                    access: Access::Read,
                    need: Need::Pull,
                };
                this.fetch_verified(&request, &digest).await
            }
        };
        let counters = this.counters(|c| (&c.content_hits, &c.content_misses));
        let content = this
            .caches
            .content
            .get_or_load(this.key(image, &descriptor.digest), counters, &target, load)
            .await?;
        // The same digest may have been cached under a larger limit (a config blob).
        if content.body.len() as u64 > limit {
            return Err(too_large());
        }
        Ok(content.body)
    }

    /// An image's referrers, through the referrers cache: the referrers API, or the tag scheme
    /// when the registry does not have that API.
    pub(crate) async fn referrers(
        this: &Arc<Self>,
        image: &Reference,
        subject: &str,
    ) -> Result<Arc<Vec<Descriptor>>> {
        let pinned = reference::at_digest(image, subject);
        let target = reference::target(&pinned);
        let load = {
            let this = Arc::clone(this);
            let pinned = pinned.clone();
            let target = target.clone();
            async move { this.list_referrers(&pinned, &target).await.map(Arc::new) }
        };
        let counters = this.counters(|c| (&c.referrers_hits, &c.referrers_misses));
        this.caches
            .referrers
            .get_or_load(this.key(image, subject), counters, &target, load)
            .await
    }

    async fn list_referrers(
        self: &Arc<Self>,
        pinned: &Reference,
        target: &Target,
    ) -> Result<Vec<Descriptor>> {
        let subject = reference::manifest_reference(pinned);
        let request = Request {
            target,
            host: reference::api_host(pinned),
            path: format!(
                "/v2/{}/referrers/{subject}?artifactType={NFD_ARTIFACT_TYPE}",
                pinned.repository()
            ),
            accept: &[OCI_INDEX],
            head: false,
            limit: self.max_manifest_bytes,
            what: "referrers",
            access: Access::Read,
            // The list is not content by digest: as a tag, only a host trusted to resolve.
            need: Need::Resolve,
        };
        match self.transport.fetch(&request).await {
            Ok(answer) => match Manifest::parse(&answer.body, answer.content_type.as_deref()) {
                Ok(Manifest::Index(index)) => Ok(index.manifests),
                Ok(Manifest::Image(_)) => Err(Error::content(
                    target,
                    ContentProblem::NotAManifest(
                        "the referrers API answered with an image manifest".into(),
                    ),
                )),
                Err(problem) => Err(Error::content(target, problem)),
            },
            // No referrers API: the tag scheme. The referrers cache already bounds staleness,
            // so the fallback tag is resolved afresh rather than through the tag cache.
            Err(Error::NotFound { .. }) => {
                let tag = reference::at_tag(pinned, &reference::referrers_tag(subject));
                let digest = match self.resolve_tag(&tag).await? {
                    TagEntry::Digest(digest) => digest,
                    TagEntry::Missing => return Ok(Vec::new()),
                };
                match Self::manifest(self, &reference::at_digest(pinned, &digest)).await? {
                    Manifest::Index(index) => Ok(index.manifests),
                    Manifest::Image(_) => Err(Error::content(
                        target,
                        ContentProblem::NotAManifest(
                            "the referrers tag points at an image manifest, not an index".into(),
                        ),
                    )),
                }
            }
            Err(err) => Err(err),
        }
    }
}
