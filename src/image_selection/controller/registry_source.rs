//! The registry room behind the reconciler's [`Source`] seam: the registry's clients (one for
//! anonymous access and the `--docker-config` credentials, one per pull Secret, sharing caches);
//! errors classified into condition reasons with the registry's whole message. A candidate image
//! whose platforms cannot be read during an outage keeps the platforms last read for it (the
//! registry room remembers them). Policies ocifit took charge of for pods' `image-ref`s are read
//! by a client of their own: no credentials at all, and its own request bound, cache and
//! connections, so what a pod author names never takes an admin policy's requests.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use futures_util::future::{BoxFuture, join_all};

use super::{Fetched, Request, Source, Wanted};
use crate::api::{Candidate, Reason};
use crate::engine::Format;
use crate::registry::{
    Clients, DockerConfig, ErrorKind, Registry, RegistryOptions, RegistryStats, ResolveError,
    parse_reference,
};

/// Registry requests managed policies may have in flight at once (their own bound).
const MANAGED_REQUESTS: usize = 4;
/// Content managed policies' client keeps (their own cache).
const MANAGED_CACHE_BYTES: u64 = 8 * 1024 * 1024;
use crate::image_selection::resolution::Failure;
use crate::image_selection::resolution::{
    AttachedArtifact, CandidateArtifact, Content, Resolved, candidates_digest,
};
use crate::image_selection::resolution::{PlatformLookup, Platforms};
use crate::telemetry::error_chain;

/// Resolves artifacts through registry clients built from one set of options.
pub struct RegistrySource {
    clients: Clients,
    /// Managed policies' client: anonymous, with its own request bound and cache.
    managed: Registry,
    outcomes: Mutex<BTreeMap<(Lookup, &'static str), u64>>,
}

/// What a registry lookup was for (a metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lookup {
    /// A compatibility artifact.
    Artifact,
    /// A candidate image's platforms.
    Platforms,
    /// A candidate image's attached NFD artifact (candidates mode).
    CandidateArtifact,
}

impl Lookup {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Lookup::Artifact => "artifact",
            Lookup::Platforms => "platforms",
            Lookup::CandidateArtifact => "candidate_artifact",
        }
    }
}

impl RegistrySource {
    /// A source whose default client uses `options` (its credentials serve policies without a
    /// pull Secret); pull Secrets get clients with the same options and their own credentials.
    pub fn new(options: RegistryOptions) -> Result<RegistrySource, crate::registry::Error> {
        let mut managed = RegistryOptions {
            credentials: DockerConfig::default(),
            max_concurrent_requests: MANAGED_REQUESTS,
            ..options.clone()
        };
        managed.cache.content_capacity_bytes = managed
            .cache
            .content_capacity_bytes
            .min(MANAGED_CACHE_BYTES);
        Ok(RegistrySource {
            managed: Registry::new(managed)?,
            clients: Clients::new(options)?,
            outcomes: Mutex::default(),
        })
    }

    /// Lookups by what they were for and outcome (`ok` or the registry error kind).
    pub fn outcomes(&self) -> Vec<((Lookup, &'static str), u64)> {
        lock(&self.outcomes).iter().map(|(k, v)| (*k, *v)).collect()
    }

    fn count(&self, lookup: Lookup, outcome: &'static str) {
        *lock(&self.outcomes).entry((lookup, outcome)).or_default() += 1;
    }

    /// Request and cache counters over every client.
    pub fn stats(&self) -> RegistryStats {
        self.clients.stats()
    }

    fn client(&self, request: &Request) -> Result<Registry, Failure> {
        if request.managed {
            // Anonymous: a pod author borrows none of ocifit's credentials.
            return Ok(self.managed.clone());
        }
        let Some(secret) = request.pull_secret.as_ref() else {
            return Ok(self.clients.default_client());
        };
        let (name, version) = secret.key.split_once('@').unwrap_or((&secret.key, ""));
        self.clients
            .named(name, version, || {
                DockerConfig::from_json(&secret.docker_config_json)
            })
            .map_err(|err| Failure {
                reason: Reason::SecretInvalid,
                message: format!(
                    "pull secret {name} is not a valid docker config: {}",
                    error_chain(&err)
                ),
            })
    }

    async fn platforms(&self, registry: &Registry, image: &str) -> PlatformLookup {
        let reference = match parse_reference(image) {
            Ok(reference) => reference,
            Err(err) => return PlatformLookup::Failed(error_chain(&err)),
        };
        let result = registry.image_platforms_or_last_known(&reference).await;
        self.count(
            Lookup::Platforms,
            result
                .as_ref()
                .map_or_else(|err| err.kind().as_str(), |_| "ok"),
        );
        match result {
            Ok(found) => PlatformLookup::Known(found.platforms),
            Err(err) => PlatformLookup::Failed(error_chain(&err)),
        }
    }
}

impl RegistrySource {
    /// `ref` mode: the one artifact the policy names.
    async fn artifact(&self, registry: &Registry, reference: &str) -> Result<Resolved, Failure> {
        let reference = parse_reference(reference).map_err(|err| Failure {
            reason: Reason::InvalidReference,
            message: error_chain(&err),
        })?;
        let result = registry.resolve_artifact(&reference).await;
        self.count(Lookup::Artifact, outcome_of(&result));
        let resolved = result.map_err(|err| failure_of(&err))?;
        Ok(Resolved {
            digest: resolved.digest,
            format: resolved.format,
            content: Content::Sets(resolved.artifact),
        })
    }

    /// Candidates mode: each candidate's attached NFD artifact. One without a parsable artifact is
    /// kept with the reason and skipped in every class; only a failure that says nothing of the
    /// candidate (an unreachable registry, rate limits, refused credentials) fails the policy.
    async fn candidates(
        &self,
        registry: &Registry,
        candidates: &[Candidate],
    ) -> Result<Resolved, Failure> {
        let found = join_all(
            candidates
                .iter()
                .map(|candidate| self.attached(registry, candidate)),
        )
        .await
        .into_iter()
        .collect::<Result<Vec<CandidateArtifact>, Failure>>()?;
        if found.iter().all(|c| c.artifact.is_err()) {
            let reasons: Vec<String> = found
                .iter()
                .filter_map(|c| {
                    c.artifact
                        .as_ref()
                        .err()
                        .map(|why| format!("{}: {why}", c.image))
                })
                .collect();
            return Err(Failure {
                reason: Reason::NotFound,
                message: format!(
                    "no candidate image has an NFD compatibility artifact attached ({})",
                    reasons.join("; ")
                ),
            });
        }
        Ok(Resolved {
            digest: candidates_digest(&found),
            format: Format::Nfd,
            content: Content::Candidates(found),
        })
    }

    async fn attached(
        &self,
        registry: &Registry,
        candidate: &Candidate,
    ) -> Result<CandidateArtifact, Failure> {
        let with = |artifact| CandidateArtifact {
            image: candidate.image.clone(),
            weight: candidate.weight,
            artifact,
        };
        let image = match parse_reference(&candidate.image) {
            Ok(image) => image,
            Err(err) => return Ok(with(Err(err.into()))),
        };
        let result = registry.resolve_nfd_artifact(&image).await;
        self.count(Lookup::CandidateArtifact, outcome_of(&result));
        match result {
            Ok(resolved) => Ok(with(Ok(AttachedArtifact {
                digest: resolved.digest,
                artifact: resolved.artifact,
            }))),
            Err(err) => match err.kind() {
                ErrorKind::NotFound
                | ErrorKind::InvalidContent
                | ErrorKind::InvalidReference
                | ErrorKind::NotAllowed => Ok(with(Err(err))),
                ErrorKind::Unauthorized
                | ErrorKind::RateLimited
                | ErrorKind::Transport
                | ErrorKind::Config => Err(failure_of(&err)),
            },
        }
    }
}

impl RegistrySource {
    /// The artifact (or candidates' artifacts) `request` names, and the client that read them
    /// (the pull Secret's, if any), for the platform lookups that follow.
    pub async fn resolved(&self, request: &Request) -> Result<(Registry, Resolved), Failure> {
        let registry = self.client(request)?;
        let resolved = match &request.wanted {
            Wanted::Reference(reference) => self.artifact(&registry, reference).await?,
            Wanted::Candidates(candidates) => self.candidates(&registry, candidates).await?,
        };
        Ok((registry, resolved))
    }
}

impl Source for RegistrySource {
    fn fetch<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Fetched, Failure>> {
        Box::pin(async move {
            let (registry, resolved) = self.resolved(request).await?;
            let images = resolved.images();
            let lookups =
                join_all(images.iter().map(|image| self.platforms(&registry, image))).await;
            let platforms: Platforms = images.into_iter().zip(lookups).collect();
            Ok(Fetched {
                resolved,
                platforms,
            })
        })
    }
}

/// The metric outcome of a lookup: `ok` or the registry error kind.
fn outcome_of<T>(result: &Result<T, ResolveError>) -> &'static str {
    result
        .as_ref()
        .map_or_else(|err| err.kind().as_str(), |_| "ok")
}

/// The condition reason and message of a failed resolution.
fn failure_of(err: &ResolveError) -> Failure {
    let reason = match err.kind() {
        ErrorKind::NotFound => Reason::NotFound,
        ErrorKind::Unauthorized => Reason::Unauthorized,
        ErrorKind::InvalidContent => Reason::InvalidArtifact,
        ErrorKind::InvalidReference => Reason::InvalidReference,
        ErrorKind::NotAllowed => Reason::RegistryNotAllowed,
        ErrorKind::RateLimited | ErrorKind::Transport | ErrorKind::Config => {
            Reason::RegistryUnavailable
        }
    };
    Failure {
        reason,
        message: error_chain(err),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_secret_that_is_not_a_docker_config_is_secret_invalid() {
        let source = RegistrySource::new(RegistryOptions::default()).unwrap();
        let failure = source
            .client(&Request {
                wanted: Wanted::Reference("r/a:v1".into()),
                pull_secret: Some(super::super::PullSecret {
                    key: "ns/regcred@1".into(),
                    docker_config_json: b"not json".to_vec(),
                }),
                managed: false,
            })
            .unwrap_err();
        assert_eq!(failure.reason, Reason::SecretInvalid);
        assert!(
            failure
                .message
                .starts_with("pull secret ns/regcred is not a valid docker config"),
            "{}",
            failure.message
        );
    }

    #[tokio::test]
    async fn a_policy_on_a_loopback_registry_is_refused_at_connect_time_unless_listed() {
        // Nothing listens on port 1: a request would fail as unavailable, not as not allowed.
        let managed = Request {
            wanted: Wanted::Reference("127.0.0.1:1/app-compat:v1".into()),
            pull_secret: None,
            managed: true,
        };
        // A policy an admin wrote gets no exception: the list is the one place internal
        // addresses are opened.
        let written = Request {
            managed: false,
            ..managed.clone()
        };
        let source = RegistrySource::new(RegistryOptions::default()).unwrap();
        for request in [&managed, &written] {
            let refused = source.fetch(request).await.unwrap_err();
            assert_eq!(
                refused.reason,
                Reason::RegistryNotAllowed,
                "{}",
                refused.message
            );
        }
        let listed = RegistrySource::new(RegistryOptions {
            private: crate::registry::PrivateRegistries::parse(&["127.0.0.1:1"]).unwrap(),
            ..RegistryOptions::default()
        })
        .unwrap();
        for request in [&managed, &written] {
            let tried = listed.fetch(request).await.unwrap_err();
            assert_eq!(
                tried.reason,
                Reason::RegistryUnavailable,
                "{}",
                tried.message
            );
        }
    }

    #[test]
    fn a_registry_not_allowed_is_its_own_condition_reason() {
        let err = ResolveError::Registry(crate::registry::Error::NotAllowed {
            target: crate::registry::Target {
                registry: "evil.example".into(),
                repository: "x".into(),
                reference: "v1".into(),
            },
            host: "evil.example".into(),
            why: crate::registry::Refusal::Registry,
        });
        let failure = failure_of(&err);
        assert_eq!(failure.reason, Reason::RegistryNotAllowed);
        assert!(
            failure.message.contains("evil.example"),
            "{}",
            failure.message
        );
    }

    /// A registry on loopback answering every request with a Basic challenge; the requests'
    /// heads as received.
    async fn challenging_registry() -> (String, std::sync::Arc<Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let heads = std::sync::Arc::new(Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&heads);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = vec![0; 8192];
                let n = stream.read(&mut head).await.unwrap_or(0);
                lock(&seen).push(String::from_utf8_lossy(&head[..n]).to_lowercase());
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Basic realm=\"r\"\r\n\
                          content-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
            }
        });
        (host, heads)
    }

    #[tokio::test]
    async fn a_managed_policy_is_read_without_ocifits_credentials() {
        let (host, heads) = challenging_registry().await;
        let config =
            format!(r#"{{"auths":{{"{host}":{{"username":"ocifit","password":"own"}}}}}}"#);
        let options = RegistryOptions {
            plain_http: vec![host.clone()],
            credentials: DockerConfig::from_json(config.as_bytes()).unwrap(),
            private: crate::registry::PrivateRegistries::parse(&[host.as_str()]).unwrap(),
            ..RegistryOptions::default()
        };
        let source = RegistrySource::new(options).unwrap();
        let request = |managed| Request {
            wanted: Wanted::Reference(format!("{host}/app-compat:v1")),
            pull_secret: None,
            managed,
        };
        source.fetch(&request(true)).await.unwrap_err();
        let sent = lock(&heads).clone();
        assert!(!sent.is_empty());
        assert!(
            sent.iter().all(|head| !head.contains("authorization:")),
            "{sent:?}"
        );
        // An admin's policy on the same registry is read with ocifit's credentials.
        source.fetch(&request(false)).await.unwrap_err();
        assert!(
            lock(&heads)
                .iter()
                .any(|head| head.contains("authorization: basic")),
            "{:?}",
            lock(&heads)
        );
    }

    #[tokio::test]
    async fn a_managed_policy_names_no_private_image_even_by_a_name_that_resolves_to_one() {
        let source = RegistrySource::new(RegistryOptions::default()).unwrap();
        // The artifact by a name, not an address: refused once the name resolves to loopback.
        let request = Request {
            wanted: Wanted::Reference("localhost:1/app-compat:v1".into()),
            pull_secret: None,
            managed: true,
        };
        let refused = source.fetch(&request).await.unwrap_err();
        assert_eq!(
            refused.reason,
            Reason::RegistryNotAllowed,
            "{}",
            refused.message
        );
        // Every image the artifact names goes through the same fence, by name or by address.
        let registry = source.client(&request).unwrap();
        for image in ["localhost:1/app:v1", "127.0.0.1:1/app:v1"] {
            match source.platforms(&registry, image).await {
                PlatformLookup::Failed(why) => {
                    assert!(
                        why.contains("--allowed-private-registries"),
                        "{image}: {why}"
                    );
                }
                other => panic!("{image}: {other:?}"),
            }
        }
        assert!(
            source
                .outcomes()
                .iter()
                .all(|((_, outcome), _)| *outcome == "not_allowed"),
            "{:?}",
            source.outcomes()
        );
    }
}
