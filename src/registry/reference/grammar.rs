//! The distribution reference grammar (`host[:port]/path[:tag][@digest]`), checked by hand over
//! bytes: the references oci-spec's parser accepts, read the same way and refused for the same
//! reasons, without its regex (whose captures cost more than the rest of a step's planning, and
//! every step URI is checked at admission). One difference: a tag is ASCII, as the distribution
//! spec writes it (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`), where the regex's `\w` took any Unicode
//! letter no registry accepts.

use oci_spec::distribution::{ParseError, Reference};

/// The longest repository name (after Docker Hub's `library/` is added).
const NAME_MAX: usize = 255;
/// The longest tag.
const TAG_MAX: usize = 128;
/// The shortest digest's hex, before its algorithm's own length is checked.
const DIGEST_HEX_MIN: usize = 32;
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_LEGACY: &str = "index.docker.io";
const DOCKER_HUB_OFFICIAL: &str = "library/";
const DEFAULT_TAG: &str = "latest";

/// Parses a reference exactly as written (no trimming).
pub(super) fn parse(input: &str) -> Result<Reference, ParseError> {
    if input.is_empty() {
        return Err(ParseError::NameEmpty);
    }
    // Neither the name nor the tag may hold `@`, nor a digest: the first one starts the digest.
    let (rest, digest) = match input.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (input, None),
    };
    let (name, tag) = split_tag(rest);
    let well_formed =
        name_is_valid(name) && tag.is_none_or(tag_is_valid) && digest.is_none_or(digest_is_valid);
    if !well_formed {
        return Err(ParseError::ReferenceInvalidFormat);
    }
    let (registry, repository) = split_domain(name);
    if repository.len() > NAME_MAX {
        return Err(ParseError::NameTooLong);
    }
    if let Some(digest) = digest {
        check_digest_length(digest)?;
    }
    Ok(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag.into(), digest.into())
        }
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest.into()),
        (tag, None) => Reference::with_tag(registry, repository, tag.unwrap_or(DEFAULT_TAG).into()),
    })
}

/// The tag follows the last `:` when no `/` comes after it (a `:` before a `/` is the host's
/// port, and a tag holds neither).
fn split_tag(rest: &str) -> (&str, Option<&str>) {
    match rest.rfind(':') {
        Some(at) if !rest[at..].contains('/') => (&rest[..at], Some(&rest[at + 1..])),
        _ => (rest, None),
    }
}

/// `[domain/]component(/component)*`: the first of several parts may be a domain instead.
fn name_is_valid(name: &str) -> bool {
    let mut parts = name.split('/');
    let first = parts.next().unwrap_or_default();
    let mut rest = parts.peekable();
    if rest.peek().is_none() {
        return path_component_is_valid(first);
    }
    (domain_is_valid(first) || path_component_is_valid(first)) && rest.all(path_component_is_valid)
}

/// `label(.label)*[:port]`; a label is ASCII letters, digits and inner hyphens.
fn domain_is_valid(domain: &str) -> bool {
    let (host, port) = match domain.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    let port_is_valid = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    port_is_valid
        && host.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    first.is_ascii_alphanumeric()
                        && last.is_ascii_alphanumeric()
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
                }
                _ => false,
            }
        })
}

/// Runs of lowercase letters and digits, joined by one separator: `.`, `_`, `__` or any number
/// of `-`.
fn path_component_is_valid(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(alnum) || !bytes.last().is_some_and(alnum) {
        return false;
    }
    bytes.split(alnum).all(|separator| match separator {
        [] | [b'.'] | [b'_'] | [b'_', b'_'] => true,
        dashes => dashes.iter().all(|b| *b == b'-'),
    })
}

fn word(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || *b == b'_'
}

fn tag_is_valid(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    bytes.len() <= TAG_MAX
        && bytes.first().is_some_and(word)
        && bytes.iter().all(|b| word(b) || *b == b'.' || *b == b'-')
}

/// `algorithm:hex`: the algorithm's parts are a letter then letters and digits, joined by one of
/// `-_+.`; at least 32 hex digits.
fn digest_is_valid(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let algorithm_is_valid = algorithm.split(['-', '_', '+', '.']).all(|part| {
        let bytes = part.as_bytes();
        bytes.first().is_some_and(u8::is_ascii_alphabetic)
            && bytes.iter().all(u8::is_ascii_alphanumeric)
    });
    algorithm_is_valid && hex.len() >= DIGEST_HEX_MIN && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Only the SHA-2 digests are known, each at its own length.
fn check_digest_length(digest: &str) -> Result<(), ParseError> {
    let (algorithm, hex) = digest
        .split_once(':')
        .ok_or(ParseError::DigestInvalidFormat)?;
    let expected = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ParseError::DigestUnsupported),
    };
    if hex.len() == expected {
        Ok(())
    } else {
        Err(ParseError::DigestInvalidLength)
    }
}

/// The registry and repository of a valid name: the first part is the registry when it looks
/// like a host (a `.` or a `:`, or `localhost`), else the name is Docker Hub's, whose one-part
/// names are in `library/`.
fn split_domain(name: &str) -> (String, String) {
    let (domain, remainder) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
        _ => (DOCKER_HUB, name),
    };
    let domain = if domain == DOCKER_HUB_LEGACY {
        DOCKER_HUB
    } else {
        domain
    };
    let repository = if domain == DOCKER_HUB && !remainder.contains('/') {
        format!("{DOCKER_HUB_OFFICIAL}{remainder}")
    } else {
        remainder.to_string()
    };
    (domain.to_string(), repository)
}

#[cfg(test)]
mod tests;
