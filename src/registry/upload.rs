//! Pushing to a registry: blobs streamed through one upload session (POST, one PATCH carrying the
//! whole stream, PUT with the digest computed on the way, so nothing is read twice and memory holds
//! only the chunks in flight), small blobs in one PUT, and manifests. Existing blobs are not sent
//! again when their digest is known beforehand.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderValue, LOCATION};
use reqwest::{Body, Method, Response, Url};
use sha2::{Digest as _, Sha256};

use super::client::Registry;
use super::error::{Access, ContentProblem, Error, Result, Target};
use super::manifest::{self, hex, sha256_digest};
use super::reference::{self, Reference};
use super::transport::Exchange;

/// A blob the registry holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedBlob {
    /// `sha256:<hex>` of the content.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
}

const OCTET_STREAM: &str = "application/octet-stream";

impl Registry {
    /// Whether the reference's repository holds the blob `digest`.
    pub async fn blob_exists(&self, repository: &Reference, digest: &str) -> Result<bool> {
        let pinned = reference::at_digest(repository, digest);
        let target = reference::target(&pinned);
        if !manifest::is_valid_digest(digest) {
            return Err(Error::content(
                &target,
                ContentProblem::UnsupportedDigest(digest.to_string()),
            ));
        }
        let location = format!("/v2/{}/blobs/{digest}", repository.repository());
        let exchange = exchange(&target, repository, Method::HEAD, &location, "blob");
        match self.inner.transport.exchange(&exchange).await {
            Ok(_) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Pushes a blob held in memory (a config, a small file) unless the repository has it.
    pub async fn push_blob(&self, repository: &Reference, content: Bytes) -> Result<PushedBlob> {
        let blob = PushedBlob {
            digest: sha256_digest(&content),
            size: content.len() as u64,
        };
        if self.blob_exists(repository, &blob.digest).await? {
            return Ok(blob);
        }
        let target = reference::target(repository);
        let location = self.start_upload(repository, &target).await?;
        let url = with_digest(&target, &location, &blob.digest)?;
        let mut put = exchange(&target, repository, Method::PUT, &url, "upload");
        put.headers
            .insert(CONTENT_TYPE, HeaderValue::from_static(OCTET_STREAM));
        put.body = Some(content);
        self.inner.transport.exchange(&put).await?;
        Ok(blob)
    }

    /// Pushes a blob read from `content` as it comes, hashing it on the way; memory holds only the
    /// chunks in flight. A read error of the stream fails the upload (its text is in the error).
    pub async fn push_blob_stream<S>(
        &self,
        repository: &Reference,
        content: S,
    ) -> Result<PushedBlob>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    {
        let target = reference::target(repository);
        let location = self.start_upload(repository, &target).await?;
        let sum = Arc::new(Mutex::new((Sha256::new(), 0u64)));
        let counted = {
            let sum = Arc::clone(&sum);
            let counters = Arc::clone(&self.inner.counters);
            content.map(move |chunk| {
                if let Ok(bytes) = &chunk {
                    let mut sum = sum.lock().unwrap_or_else(PoisonError::into_inner);
                    sum.0.update(bytes);
                    sum.1 += bytes.len() as u64;
                    counters
                        .streamed_bytes
                        .fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                chunk
            })
        };
        let mut patch = exchange(&target, repository, Method::PATCH, &location, "upload");
        patch
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static(OCTET_STREAM));
        let answer = self
            .inner
            .transport
            .stream(&patch, Body::wrap_stream(counted))
            .await?;
        let location = next_location(&target, &answer).unwrap_or(location);
        let (hasher, size) =
            std::mem::take(&mut *sum.lock().unwrap_or_else(PoisonError::into_inner));
        let digest = format!("sha256:{}", hex(&hasher.finalize()));
        let url = with_digest(&target, &location, &digest)?;
        let mut put = exchange(&target, repository, Method::PUT, &url, "upload");
        put.headers
            .insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
        self.inner.transport.exchange(&put).await?;
        Ok(PushedBlob { digest, size })
    }

    /// Puts a manifest under the reference's tag (or digest); its digest.
    pub async fn push_manifest(
        &self,
        reference: &Reference,
        media_type: &str,
        body: Bytes,
    ) -> Result<String> {
        let target = reference::target(reference);
        let digest = sha256_digest(&body);
        let location = format!(
            "/v2/{}/manifests/{}",
            reference.repository(),
            reference::manifest_reference(reference)
        );
        let mut put = exchange(&target, reference, Method::PUT, &location, "manifest");
        let content_type = HeaderValue::from_str(media_type).map_err(|_| {
            Error::content(
                &target,
                ContentProblem::UnsupportedMediaType(media_type.to_string()),
            )
        })?;
        put.headers.insert(CONTENT_TYPE, content_type);
        put.body = Some(body);
        let answer = self.inner.transport.exchange(&put).await?;
        let stored = answer
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok());
        match stored {
            Some(stored) if stored != digest => Err(Error::content(
                &target,
                ContentProblem::DigestMismatch {
                    expected: digest,
                    actual: stored.to_string(),
                },
            )),
            _ => Ok(digest),
        }
    }

    /// Opens an upload session; its location.
    async fn start_upload(&self, repository: &Reference, target: &Target) -> Result<String> {
        let location = format!("/v2/{}/blobs/uploads/", repository.repository());
        let mut post = exchange(target, repository, Method::POST, &location, "upload");
        post.headers
            .insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
        let answer = self.inner.transport.exchange(&post).await?;
        next_location(target, &answer).ok_or_else(|| {
            Error::content(
                target,
                ContentProblem::Protocol(
                    "the registry opened an upload without a Location header".into(),
                ),
            )
        })
    }
}

fn exchange<'a>(
    target: &'a Target,
    repository: &'a Reference,
    method: Method,
    location: &'a str,
    what: &'static str,
) -> Exchange<'a> {
    Exchange {
        target,
        host: reference::api_host(repository),
        method,
        location,
        headers: HeaderMap::new(),
        body: None,
        what,
        bounded: true,
        access: Access::Push,
    }
}

fn next_location(target: &Target, answer: &Response) -> Option<String> {
    let location = answer.headers().get(LOCATION)?.to_str().ok()?;
    tracing::trace!(%target, location, "upload location");
    Some(location.to_string())
}

/// The upload's location with `digest=` added to its query (it may carry the registry's own
/// state), relative when the registry gave it relative.
fn with_digest(target: &Target, location: &str, digest: &str) -> Result<String> {
    // A relative location is resolved against a placeholder base only to edit its query.
    let base = Url::parse("http://registry.invalid").map_err(|e| protocol(target, &e))?;
    let mut url = base.join(location).map_err(|e| protocol(target, &e))?;
    url.query_pairs_mut().append_pair("digest", digest);
    if location.starts_with('/') {
        Ok(format!(
            "{}?{}",
            url.path(),
            url.query().unwrap_or_default()
        ))
    } else {
        Ok(url.into())
    }
}

fn protocol(target: &Target, err: &dyn std::fmt::Display) -> Error {
    Error::content(
        target,
        ContentProblem::Protocol(format!("unusable upload location: {err}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            registry: "127.0.0.1:5000".into(),
            repository: "a/b".into(),
            reference: "v1".into(),
        }
    }

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_relative_location_keeps_its_state_and_gains_the_digest() {
        let url = with_digest(&target(), "/v2/a/b/blobs/uploads/u1?_state=xyz", D).unwrap();
        assert_eq!(
            url,
            "/v2/a/b/blobs/uploads/u1?_state=xyz&digest=sha256%3A0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        );
    }

    /// A registry behind htpasswd refuses an anonymous client: the message says which operation
    /// it refused, a push (even its first request, a HEAD of the blob) or a read.
    #[tokio::test]
    async fn a_refused_push_says_push_and_a_refused_read_says_read() {
        let registry = ocifit_testkit::Registry::builder()
            .with_basic_auth("steps", "pa55-w0rd")
            .start()
            .await
            .expect("the test registry");
        let client = Registry::new(crate::registry::RegistryOptions {
            plain_http: vec![registry.addr().to_owned()],
            // The test registry is on loopback.
            private: crate::registry::PrivateRegistries::parse(&[registry.addr()]).expect("a host"),
            ..Default::default()
        })
        .expect("a client");
        let reference =
            crate::registry::parse_reference(&registry.reference("w/out:v1")).expect("a reference");

        let push = client
            .push_blob(&reference, Bytes::from_static(b"output"))
            .await
            .expect_err("an anonymous push is refused");
        assert_eq!(push.kind(), crate::registry::ErrorKind::Unauthorized);
        let text = push.to_string();
        assert!(
            text.starts_with("unauthorized to push 127.0.0.1:"),
            "{text}"
        );

        let read = client
            .fetch_artifact(&reference)
            .await
            .expect_err("an anonymous read is refused");
        let text = read.to_string();
        assert!(
            text.starts_with("unauthorized to read 127.0.0.1:"),
            "{text}"
        );
    }

    #[test]
    fn an_absolute_location_stays_absolute() {
        let url = with_digest(
            &target(),
            "http://127.0.0.1:5000/v2/a/b/blobs/uploads/u1",
            D,
        )
        .unwrap();
        assert!(
            url.starts_with("http://127.0.0.1:5000/v2/a/b/blobs/uploads/u1?digest=sha256%3A"),
            "{url}"
        );
    }
}
