//! Reading content of any size from a registry: an image manifest by tag or digest, and a blob as
//! a stream of chunks checked against its descriptor's digest and size on the way, so a caller can
//! write it out without holding it and learns of a mismatch before it trusts what it wrote.

use std::time::Duration;

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_RANGE, HeaderMap, HeaderValue, RANGE};
use reqwest::{Method, Response};
use sha2::{Digest as _, Sha256, Sha512};

use super::client::Registry;
use super::error::{Access, ContentProblem, Error, Result, Target};
use super::fetch::Inner;
use super::manifest::{self, Descriptor, ImageManifest, Manifest, hex};
use super::reference::{self, Reference};
use super::retry::BrokeOff;
use super::stats::Counters;
use super::transport::Exchange;

impl Registry {
    /// The image manifest a reference names (tag or digest), and its digest.
    pub async fn image_manifest(&self, reference: &Reference) -> Result<(String, ImageManifest)> {
        let digest = self.resolve_digest(reference).await?;
        let pinned = reference::at_digest(reference, &digest);
        match Inner::manifest(&self.inner, &pinned).await? {
            Manifest::Image(manifest) => Ok((digest, *manifest)),
            Manifest::Index(_) => Err(Error::content(
                &reference::target(&pinned),
                ContentProblem::UnexpectedIndex,
            )),
        }
    }

    /// A blob of the reference's repository, streamed; see [`BlobStream`].
    pub async fn blob_stream(
        &self,
        repository: &Reference,
        descriptor: &Descriptor,
    ) -> Result<BlobStream> {
        let pinned = reference::at_digest(repository, &descriptor.digest);
        let target = reference::target(&pinned);
        let hasher = match descriptor.digest.split_once(':') {
            Some(("sha256", _)) if manifest::is_valid_digest(&descriptor.digest) => {
                Hasher::Sha256(Sha256::new())
            }
            Some(("sha512", _)) if manifest::is_valid_digest(&descriptor.digest) => {
                Hasher::Sha512(Box::new(Sha512::new()))
            }
            _ => {
                return Err(Error::content(
                    &target,
                    ContentProblem::UnsupportedDigest(descriptor.digest.clone()),
                ));
            }
        };
        let size = u64::try_from(descriptor.size).map_err(|_| {
            Error::content(
                &target,
                ContentProblem::Protocol(format!("negative blob size {}", descriptor.size)),
            )
        })?;
        let location = format!(
            "/v2/{}/blobs/{}",
            repository.repository(),
            descriptor.digest
        );
        let response = self.blob_from(repository, &target, &location, 0).await?;
        check_length(&target, &response, size)?;
        Ok(BlobStream {
            registry: self.clone(),
            repository: repository.clone(),
            location,
            idle: self.inner.transport.idle_timeout(),
            response,
            hasher: Some(hasher),
            expected: descriptor.digest.clone(),
            size,
            read: 0,
            skip: 0,
            breaks: 0,
            target,
            counters: std::sync::Arc::clone(&self.inner.counters),
        })
    }

    /// The blob's answer from byte `from` on (a Range request when `from` is not 0; the registry
    /// may answer with the whole blob instead).
    async fn blob_from(
        &self,
        repository: &Reference,
        target: &Target,
        location: &str,
        from: u64,
    ) -> Result<Response> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        if from > 0 {
            let range = HeaderValue::from_str(&format!("bytes={from}-"))
                .map_err(|err| Error::content(target, ContentProblem::Protocol(err.to_string())))?;
            headers.insert(RANGE, range);
        }
        let exchange = Exchange {
            target,
            host: reference::api_host(repository),
            method: Method::GET,
            location,
            headers,
            body: None,
            what: "blob",
            bounded: false,
            access: Access::Read,
        };
        self.inner.transport.exchange(&exchange).await
    }
}

/// Refuses an answer announcing another length than the `expected` bytes.
fn check_length(target: &Target, response: &Response, expected: u64) -> Result<()> {
    match response.content_length() {
        Some(len) if len != expected => Err(Error::content(
            target,
            ContentProblem::Protocol(format!(
                "the registry announced {len} bytes for a blob of {expected}"
            )),
        )),
        _ => Ok(()),
    }
}

enum Hasher {
    Sha256(Sha256),
    Sha512(Box<Sha512>),
}

impl Hasher {
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            Hasher::Sha256(h) => format!("sha256:{}", hex(&h.finalize())),
            Hasher::Sha512(h) => format!("sha512:{}", hex(&h.finalize())),
        }
    }
}

/// A blob's content as it arrives: [`BlobStream::next_chunk`] gives every chunk, then `None` once
/// it matched the descriptor's size and digest (a mismatch or a stalled chunk is an error). A
/// broken download is asked for again from where it stopped, as the client's restarts allow.
pub struct BlobStream {
    registry: Registry,
    repository: Reference,
    location: String,
    response: Response,
    hasher: Option<Hasher>,
    expected: String,
    size: u64,
    read: u64,
    /// Bytes of the answer already given from an earlier one.
    skip: u64,
    /// Times the download broke off.
    breaks: u32,
    idle: Duration,
    target: Target,
    counters: std::sync::Arc<Counters>,
}

impl std::fmt::Debug for BlobStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobStream")
            .field("target", &self.target)
            .field("size", &self.size)
            .field("read", &self.read)
            .finish_non_exhaustive()
    }
}

impl BlobStream {
    /// The blob's size from its descriptor.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The next chunk, or `None` at the verified end.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        loop {
            let mut broken = match self.read_chunk().await {
                Ok(Some(chunk)) if chunk.is_empty() => continue,
                Err(err) if err.broke_off() && self.hasher.is_some() => err,
                other => return other,
            };
            loop {
                self.breaks += 1;
                let Some(wait) = self.registry.restarts().after(self.breaks) else {
                    return Err(self.gave_up(&broken));
                };
                tracing::warn!(target = %self.target, read = self.read, ?wait, error = %broken, "the blob's download broke off; asking again from where it stopped");
                tokio::time::sleep(wait).await;
                match self.resume().await {
                    Ok(()) => break,
                    Err(err) if err.broke_off() => broken = err,
                    Err(err) => return Err(err),
                }
            }
        }
    }

    /// Asks for the rest of the blob after the bytes already read.
    async fn resume(&mut self) -> Result<()> {
        let response = self
            .registry
            .blob_from(&self.repository, &self.target, &self.location, self.read)
            .await?;
        let resumed = response.status() == StatusCode::PARTIAL_CONTENT;
        if resumed {
            let range = response
                .headers()
                .get(CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if !range.starts_with(&format!("bytes {}-", self.read)) {
                return Err(self.mismatch(format!(
                    "a range {range:?} where bytes from {} were asked for",
                    self.read
                )));
            }
        }
        let (rest, skip) = if resumed {
            (self.size - self.read, 0)
        } else {
            (self.size, self.read)
        };
        check_length(&self.target, &response, rest)?;
        self.response = response;
        self.skip = skip;
        Ok(())
    }

    fn gave_up(&self, last: &Error) -> Error {
        Error::Transport {
            target: self.target.clone(),
            detail: format!(
                "the download broke off {} times, {} of {} bytes read; the last time: {last}",
                self.breaks, self.read, self.size
            ),
            source: None,
        }
    }

    /// One chunk as the answer gives it, less what was already given; empty when all of it was.
    async fn read_chunk(&mut self) -> Result<Option<Bytes>> {
        let Some(hasher) = self.hasher.as_mut() else {
            return Ok(None);
        };
        let chunk = tokio::time::timeout(self.idle, self.response.chunk())
            .await
            .map_err(|_| Error::Transport {
                target: self.target.clone(),
                detail: format!(
                    "no data for {} s while reading the blob",
                    self.idle.as_secs()
                ),
                source: None,
            })?
            .map_err(|err| Error::Transport {
                target: self.target.clone(),
                detail: format!("failed to read the blob: {err}"),
                source: Some(std::sync::Arc::new(err.without_url())),
            })?;
        match chunk {
            Some(mut bytes) => {
                let skipped = self.skip.min(bytes.len() as u64);
                self.skip -= skipped;
                let bytes = bytes.split_off(usize::try_from(skipped).unwrap_or(usize::MAX));
                self.read += bytes.len() as u64;
                self.counters
                    .streamed_bytes
                    .fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
                if self.read > self.size {
                    return Err(
                        self.mismatch(format!("more than the {} bytes announced", self.size))
                    );
                }
                hasher.update(&bytes);
                Ok(Some(bytes))
            }
            None => {
                if self.read != self.size {
                    return Err(self.mismatch(format!(
                        "{} bytes where the descriptor says {}",
                        self.read, self.size
                    )));
                }
                let actual = self.hasher.take().map(Hasher::finish).unwrap_or_default();
                if actual != self.expected {
                    return Err(Error::content(
                        &self.target,
                        ContentProblem::DigestMismatch {
                            expected: self.expected.clone(),
                            actual,
                        },
                    ));
                }
                Ok(None)
            }
        }
    }

    fn mismatch(&self, what: String) -> Error {
        Error::content(
            &self.target,
            ContentProblem::Protocol(format!("the blob has {what}")),
        )
    }
}
