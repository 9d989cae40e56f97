//! Errors of the registry room, classified the way callers act on them: not found, unauthorized,
//! rate limited, invalid content, transport (and bad configuration). Every message names the
//! registry, repository and reference; none ever carries a credential or a response body.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What a request was about: `registry/repository` plus a tag or digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub registry: String,
    pub repository: String,
    /// A tag, or a digest (`sha256:…`).
    pub reference: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A digest (`sha256:…`) follows `@`; a tag (maybe `tag@digest`) follows `:`.
        let tag_part = self.reference.split('@').next().unwrap_or_default();
        let sep = if tag_part.contains(':') { '@' } else { ':' };
        write!(
            f,
            "{}/{}{sep}{}",
            self.registry, self.repository, self.reference
        )
    }
}

/// How a failure should be treated: for metrics, conditions and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidReference,
    NotFound,
    Unauthorized,
    RateLimited,
    InvalidContent,
    Transport,
    Config,
}

impl ErrorKind {
    /// A stable lowercase name, for metric labels and condition reasons.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidReference => "invalid_reference",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::InvalidContent => "invalid_content",
            ErrorKind::Transport => "transport",
            ErrorKind::Config => "config",
        }
    }
}

/// A failure to read something from a registry.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The text is not a valid OCI reference.
    #[error("invalid reference {input:?}: {reason}")]
    InvalidReference { input: String, reason: String },
    /// The registry has no such repository, tag, manifest or blob.
    #[error("{what} not found: {target}")]
    NotFound { target: Target, what: &'static str },
    /// The registry refused access: no credentials, wrong credentials, or not allowed.
    #[error(
        "unauthorized to read {target} (HTTP {status}): check the credentials for {}",
        target.registry
    )]
    Unauthorized { target: Target, status: u16 },
    /// The registry kept answering 429 Too Many Requests.
    #[error("rate limited by the registry while reading {target}{}", retry_after_text(*.retry_after))]
    RateLimited {
        target: Target,
        retry_after: Option<Duration>,
    },
    /// The registry answered, but not with what was asked for.
    #[error("invalid content at {target}: {problem}")]
    InvalidContent {
        target: Target,
        #[source]
        problem: Box<ContentProblem>,
    },
    /// The registry could not be reached, timed out, or failed with a server error.
    #[error("failed to reach the registry for {target}: {detail}")]
    Transport {
        target: Target,
        detail: String,
        #[source]
        source: Option<Arc<reqwest::Error>>,
    },
    /// The client's own configuration is unusable (CA file, docker config, TLS setup).
    #[error("invalid registry client configuration: {0}")]
    Config(#[source] ConfigError),
}

fn retry_after_text(retry_after: Option<Duration>) -> String {
    retry_after
        .map(|d| format!(" (retry after {} s)", d.as_secs()))
        .unwrap_or_default()
}

impl Error {
    /// The class of this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidReference { .. } => ErrorKind::InvalidReference,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Unauthorized { .. } => ErrorKind::Unauthorized,
            Error::RateLimited { .. } => ErrorKind::RateLimited,
            Error::InvalidContent { .. } => ErrorKind::InvalidContent,
            Error::Transport { .. } => ErrorKind::Transport,
            Error::Config(_) => ErrorKind::Config,
        }
    }

    /// The same failure, said about `target` (e.g. the tag the user gave rather than a blob).
    pub(crate) fn about(mut self, target: &Target) -> Self {
        match &mut self {
            Error::NotFound { target: t, .. }
            | Error::Unauthorized { target: t, .. }
            | Error::RateLimited { target: t, .. }
            | Error::InvalidContent { target: t, .. }
            | Error::Transport { target: t, .. } => *t = target.clone(),
            Error::InvalidReference { .. } | Error::Config(_) => {}
        }
        self
    }

    pub(crate) fn content(target: &Target, problem: ContentProblem) -> Self {
        Error::InvalidContent {
            target: target.clone(),
            problem: Box::new(problem),
        }
    }
}

/// What is wrong with content a registry returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentProblem {
    /// The bytes do not hash to the digest they were fetched by.
    #[error("digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch { expected: String, actual: String },
    /// The content is larger than the configured cap.
    #[error("content is larger than the {limit}-byte limit")]
    TooLarge { limit: u64 },
    /// The body is not a manifest or index this client understands.
    #[error("not a valid manifest: {0}")]
    NotAManifest(String),
    /// A manifest media type this client does not read.
    #[error("unsupported manifest media type {0:?}")]
    UnsupportedMediaType(String),
    /// A digest algorithm this client cannot verify.
    #[error("unsupported or malformed digest {0:?}")]
    UnsupportedDigest(String),
    /// An image index where an artifact manifest was expected.
    #[error("expected an artifact manifest, found an image index")]
    UnexpectedIndex,
    /// The manifest has no layer of a known compatibility media type.
    #[error(
        "no compatibility layer (expected media type {expected}); found media types: {}",
        list(found)
    )]
    NoKnownLayer {
        expected: String,
        found: Vec<String>,
    },
    /// More than one layer of a compatibility media type, so the choice would be a guess.
    #[error("more than one compatibility layer: {}", list(found))]
    AmbiguousLayers { found: Vec<String> },
    /// An image config blob that cannot be read.
    #[error("invalid image config: {0}")]
    BadConfig(String),
    /// An image config without os and architecture.
    #[error("image config names no os/architecture")]
    NoPlatform,
    /// Indexes nested deeper than this client follows.
    #[error("image indexes nested more than {0} deep")]
    TooDeep(usize),
    /// A registry answer this client cannot use (e.g. a missing digest header and body).
    #[error("{0}")]
    Protocol(String),
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// A problem with the client's configuration.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfigError {
    /// A file named on the command line or in a flag could not be read.
    #[error("failed to read {path}: {message}")]
    ReadFile { path: String, message: String },
    /// The CA file holds no usable PEM certificate.
    #[error("no PEM certificate in {0}")]
    NoCertificate(String),
    /// The docker config is not valid JSON of the expected shape.
    #[error("invalid docker config: {0}")]
    DockerConfig(String),
    /// The HTTP client could not be built.
    #[error("failed to build the HTTP client: {0}")]
    Http(String),
}

impl From<ConfigError> for Error {
    fn from(err: ConfigError) -> Self {
        Error::Config(err)
    }
}

/// The crate-wide result of this room.
pub type Result<T, E = Error> = std::result::Result<T, E>;
