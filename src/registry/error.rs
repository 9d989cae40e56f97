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
        // Digests in a target may come from registry content.
        write!(
            f,
            "{}/{}{sep}{}",
            clip(&self.registry),
            clip(&self.repository),
            clip(&self.reference)
        )
    }
}

/// What a refused request was for: reading (a pull, a resolve) or pushing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Push,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Push => "push",
        })
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
    /// A host the client may not reach (`--allowed-registries`, token realm and redirect rules).
    NotAllowed,
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
            ErrorKind::NotAllowed => "not_allowed",
        }
    }
}

/// A failure to read something from a registry.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The text is not a valid OCI reference.
    #[error("invalid reference {:?}: {reason}", clip(input))]
    InvalidReference { input: String, reason: String },
    /// The registry has no such repository, tag, manifest or blob.
    #[error("{what} not found: {target}")]
    NotFound { target: Target, what: &'static str },
    /// The registry refused access: no credentials, wrong credentials, or not allowed.
    #[error(
        "unauthorized to {access} {target} (HTTP {status}): check the credentials for {}",
        target.registry
    )]
    Unauthorized {
        target: Target,
        status: u16,
        access: Access,
    },
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
    #[error("failed to reach the registry for {target}: {}", clip(detail))]
    Transport {
        target: Target,
        detail: String,
        #[source]
        source: Option<Arc<reqwest::Error>>,
    },
    /// A lookup did not end within its deadline: waiting for a slot (`waiting_for_slot`), or for
    /// the registry's answers. Counted as a transport failure.
    #[error(
        "{} within the lookup deadline of {}s: {target}",
        if *waiting_for_slot { "no inspection slot was free" } else { "no answer" },
        deadline.as_secs()
    )]
    Deadline {
        target: Target,
        deadline: Duration,
        waiting_for_slot: bool,
    },
    /// The client refused to reach a host: one not in the allowed registries, a token realm or
    /// redirect that would leave them or downgrade to plain HTTP, or an address inside a network
    /// not on the private registries' list. Nothing was sent to `host`.
    #[error("refused to reach {} for {target}: {why}", clip(host))]
    NotAllowed {
        target: Target,
        /// The refused host (`name[:port]`).
        host: String,
        why: Refusal,
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
            Error::Transport { .. } | Error::Deadline { .. } => ErrorKind::Transport,
            Error::Config(_) => ErrorKind::Config,
            Error::NotAllowed { .. } => ErrorKind::NotAllowed,
        }
    }

    /// The same failure, said about `target` (e.g. the tag the user gave rather than a blob).
    pub(crate) fn about(mut self, target: &Target) -> Self {
        match &mut self {
            Error::NotFound { target: t, .. }
            | Error::Unauthorized { target: t, .. }
            | Error::RateLimited { target: t, .. }
            | Error::InvalidContent { target: t, .. }
            | Error::Transport { target: t, .. }
            | Error::Deadline { target: t, .. }
            | Error::NotAllowed { target: t, .. } => *t = target.clone(),
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

/// Why a host was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The registry is not in `--allowed-registries`.
    #[error("the registry is not in the allowed registries (--allowed-registries)")]
    Registry,
    /// The token realm is on another host that is not in the allowed registries.
    #[error("the registry's token realm is on a host not in the allowed registries")]
    RealmHost,
    /// The token realm is plain HTTP on a host not configured for plain HTTP.
    #[error(
        "the registry's token realm is not HTTPS (plain HTTP only for a host configured as a plain-HTTP registry)"
    )]
    RealmPlainHttp,
    /// A redirect to a host not in the allowed registries.
    #[error("the registry redirected to a host not in the allowed registries")]
    RedirectHost,
    /// A host that is, or resolves only to, an address inside a network (private, loopback,
    /// link-local, shared, reserved) and is not on the private registries' list.
    #[error(
        "the host's address is private, loopback, link-local or reserved (allowed only by --allowed-private-registries)"
    )]
    PrivateAddress,
    /// A host on the private registries' list with another port than the one requested.
    #[error("the host is on --allowed-private-registries with another port only")]
    PrivatePort,
    /// A redirect to plain HTTP (from HTTPS, or to a host not configured for plain HTTP).
    #[error("the registry redirected to plain HTTP, which is never followed")]
    RedirectPlainHttp,
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
    #[error("not a valid manifest: {}", clip(.0))]
    NotAManifest(String),
    /// A manifest media type this client does not read.
    #[error("unsupported manifest media type {:?}", clip(.0))]
    UnsupportedMediaType(String),
    /// A digest algorithm this client cannot verify.
    #[error("unsupported or malformed digest {:?}", clip(.0))]
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
    #[error("invalid image config: {}", clip(.0))]
    BadConfig(String),
    /// An image config without os and architecture.
    #[error("image config names no os/architecture")]
    NoPlatform,
    /// Indexes nested deeper than this client follows.
    #[error("image indexes nested more than {0} deep")]
    TooDeep(usize),
    /// A registry answer this client cannot use (e.g. a missing digest header and body).
    #[error("{}", clip(.0))]
    Protocol(String),
    /// An image index (with its nested indexes) lists more manifests than are read for one image.
    #[error("image index lists more than {0} manifests to read")]
    TooManyEntries(usize),
}

/// Most characters of one piece of outside text (registry content, a reference as written, a
/// transport library's words) that an error message carries.
const MAX_TEXT_CHARS: usize = 200;
/// Most items of an outside list that an error message names.
const MAX_LIST_ITEMS: usize = 8;

/// Outside text as an error message may carry it: control characters (newlines, escapes) replaced
/// by `?`, and at most [`MAX_TEXT_CHARS`] characters, so a registry cannot write into status
/// messages or logs beyond one short line.
pub(crate) fn clip(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_TEXT_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().nth(MAX_TEXT_CHARS).is_some() {
        out.push('…');
    }
    out
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        return "none".to_string();
    }
    let mut shown: Vec<String> = items.iter().take(MAX_LIST_ITEMS).map(|i| clip(i)).collect();
    if items.len() > MAX_LIST_ITEMS {
        shown.push(format!("and {} more", items.len() - MAX_LIST_ITEMS));
    }
    shown.join(", ")
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
    /// An `--allowed-registries` pattern is not `HOST[:PORT]` or `*.DOMAIN[:PORT]`.
    #[error("invalid allowed-registries pattern {pattern:?}: {reason}")]
    AllowedRegistry { pattern: String, reason: String },
    /// An `--allowed-private-registries` entry is not `HOST[:PORT]`, `*.DOMAIN[:PORT]` or a CIDR.
    #[error("invalid allowed-private-registries entry {entry:?}: {reason}")]
    AllowedPrivate { entry: String, reason: String },
    /// The HTTP client could not be built.
    #[error("failed to build the HTTP client: {0}")]
    Http(String),
    /// A registry mirror file (`hosts.toml`) or its directory cannot be used.
    #[error("{file}: {}{problem}", if key.is_empty() { String::new() } else { format!("key `{key}` ") })]
    Mirrors {
        file: String,
        /// The key at fault (`host."https://mirror".capabilities`); empty for the whole file.
        key: String,
        problem: String,
    },
    /// A registry's `hosts.toml` leaves no host that may do what a request needs.
    #[error("no host in the hosts.toml of {registry} may {need} (its `capabilities`)")]
    NoMirrorHost {
        registry: String,
        need: &'static str,
    },
}

impl From<ConfigError> for Error {
    fn from(err: ConfigError) -> Self {
        Error::Config(err)
    }
}

/// The crate-wide result of this room.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            registry: "r.example.com".into(),
            repository: "acme/app".into(),
            reference: "v1".into(),
        }
    }

    #[test]
    fn outside_text_in_messages_is_one_short_line() {
        let hostile = format!("evil\n\u{1b}[31mred\r{}", "x".repeat(1_000_000));
        let errors = [
            Error::content(
                &target(),
                ContentProblem::UnsupportedMediaType(hostile.clone()),
            ),
            Error::content(&target(), ContentProblem::NotAManifest(hostile.clone())),
            Error::content(
                &target(),
                ContentProblem::NoKnownLayer {
                    expected: "x".into(),
                    found: vec![hostile.clone(); 10_000],
                },
            ),
            Error::Transport {
                target: target(),
                detail: hostile.clone(),
                source: None,
            },
            Error::InvalidReference {
                input: hostile.clone(),
                reason: "bad".into(),
            },
            Error::NotAllowed {
                target: target(),
                host: hostile,
                why: Refusal::Registry,
            },
        ];
        for err in errors {
            let text = err.to_string();
            assert!(text.len() < 3_000, "{} bytes: {}", text.len(), &text[..200]);
            assert!(!text.chars().any(char::is_control), "{text:?}");
            assert!(text.contains("evil?"), "{text}");
        }
    }

    #[test]
    fn long_lists_name_the_first_items_and_count_the_rest() {
        let found: Vec<String> = (0..20).map(|i| format!("type/{i}")).collect();
        let text = ContentProblem::AmbiguousLayers { found }.to_string();
        assert!(text.ends_with("type/7, and 12 more"), "{text}");
    }

    #[test]
    fn a_refused_host_names_the_host_the_target_and_why() {
        let err = Error::NotAllowed {
            target: target(),
            host: "r.example.com".into(),
            why: Refusal::Registry,
        };
        assert_eq!(err.kind(), ErrorKind::NotAllowed);
        assert_eq!(
            err.to_string(),
            "refused to reach r.example.com for r.example.com/acme/app:v1: the registry is not in the allowed registries (--allowed-registries)"
        );
    }
}
