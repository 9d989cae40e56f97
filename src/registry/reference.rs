//! OCI references: parsing (into oci-spec's `Reference`, by the grammar in `grammar`) and what
//! a reference means on the wire. Pure: no I/O.

mod grammar;

pub use oci_spec::distribution::Reference;

use super::error::{Error, Target};

/// Docker Hub's name in references, and the host that serves its registry API.
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// Parses a reference as users write it: `ubuntu`, `ghcr.io/acme/app:v1`, `127.0.0.1:5000/a/b@sha256:…`;
/// no tag nor digest means `:latest`. Repository names must be lowercase, as Docker and the
/// distribution spec require.
pub fn parse(input: &str) -> Result<Reference, Error> {
    let invalid = |reason: String| Error::InvalidReference {
        input: input.to_string(),
        reason,
    };
    let reference = grammar::parse(input.trim()).map_err(|err| invalid(err.to_string()))?;
    if reference
        .repository()
        .bytes()
        .any(|b| b.is_ascii_uppercase())
    {
        return Err(invalid("repository name must be lowercase".into()));
    }
    Ok(reference)
}

/// What to ask the registry for: the digest when there is one (a digest wins over a tag), else
/// the tag.
pub(super) fn manifest_reference(reference: &Reference) -> &str {
    reference
        .digest()
        .or_else(|| reference.tag())
        .unwrap_or("latest")
}

/// The host (with port) that serves the registry API for a reference.
pub(super) fn api_host(reference: &Reference) -> &str {
    match reference.registry() {
        DOCKER_HUB => DOCKER_HUB_API,
        other => other,
    }
}

/// The request target for error messages and cache keys.
pub(super) fn target(reference: &Reference) -> Target {
    Target {
        registry: reference.registry().to_string(),
        repository: reference.repository().to_string(),
        reference: manifest_reference(reference).to_string(),
    }
}

/// The same repository at another digest (a child manifest, a referrer).
pub(super) fn at_digest(reference: &Reference, digest: &str) -> Reference {
    Reference::with_digest(
        reference.registry().to_string(),
        reference.repository().to_string(),
        digest.to_string(),
    )
}

/// The same repository at another tag (the referrers fallback tag).
pub(super) fn at_tag(reference: &Reference, tag: &str) -> Reference {
    Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        tag.to_string(),
    )
}

/// The tag under which registries without the referrers API keep a subject's referrers:
/// `sha256:<hex>` becomes `sha256-<hex>`.
pub(super) fn referrers_tag(subject_digest: &str) -> String {
    subject_digest.replacen(':', "-", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn parts(input: &str) -> (String, String, Option<String>, Option<String>) {
        let r = parse(input).unwrap();
        (
            r.registry().to_string(),
            r.repository().to_string(),
            r.tag().map(str::to_string),
            r.digest().map(str::to_string),
        )
    }

    #[test]
    fn docker_hub_short_name_expands_to_library_and_latest() {
        assert_eq!(
            parts("ubuntu"),
            (
                "docker.io".into(),
                "library/ubuntu".into(),
                Some("latest".into()),
                None
            )
        );
    }

    #[test]
    fn docker_hub_user_repository_keeps_its_namespace() {
        assert_eq!(parts("acme/app:v1").1, "acme/app");
        assert_eq!(parts("acme/app:v1").0, "docker.io");
        assert_eq!(parts("index.docker.io/library/ubuntu:22.04").0, "docker.io");
    }

    #[test]
    fn registry_host_with_port_is_not_mistaken_for_a_tag() {
        assert_eq!(
            parts("127.0.0.1:5000/acme/compat:v1"),
            (
                "127.0.0.1:5000".into(),
                "acme/compat".into(),
                Some("v1".into()),
                None
            )
        );
        assert_eq!(
            parts("localhost:5000/compat"),
            (
                "localhost:5000".into(),
                "compat".into(),
                Some("latest".into()),
                None
            )
        );
        assert_eq!(parts("localhost/compat").0, "localhost");
        assert_eq!(parts("registry.example.com/a/b/c:1.0").1, "a/b/c");
    }

    #[test]
    fn digest_reference_has_no_default_tag() {
        let (_, _, tag, digest) = parts(&format!("ghcr.io/acme/app@{D}"));
        assert_eq!((tag, digest.as_deref()), (None, Some(D)));
    }

    #[test]
    fn tag_plus_digest_asks_the_registry_for_the_digest() {
        let r = parse(&format!("127.0.0.1:5000/acme/app:v1@{D}")).unwrap();
        assert_eq!(r.tag(), Some("v1"));
        assert_eq!(manifest_reference(&r), D);
        assert_eq!(
            target(&r).to_string(),
            format!("127.0.0.1:5000/acme/app@{D}")
        );
    }

    #[test]
    fn target_with_tag_and_digest_reads_as_written() {
        let mut t = target(&parse("127.0.0.1:5000/acme/app:v1").unwrap());
        t.reference = format!("v1@{D}");
        assert_eq!(t.to_string(), format!("127.0.0.1:5000/acme/app:v1@{D}"));
    }

    #[test]
    fn tag_reference_asks_for_the_tag() {
        let r = parse("127.0.0.1:5000/acme/app:v1").unwrap();
        assert_eq!(manifest_reference(&r), "v1");
        assert_eq!(target(&r).to_string(), "127.0.0.1:5000/acme/app:v1");
    }

    #[test]
    fn malformed_references_are_rejected_with_the_input_named() {
        for bad in [
            "",
            "UPPER/case",
            "a/b:",
            "a@sha256:short",
            "a/b@md5:abcd",
            "has space/x",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(
                matches!(err, Error::InvalidReference { .. }),
                "{bad:?} -> {err}"
            );
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn surrounding_whitespace_is_ignored() {
        assert_eq!(parts("  ubuntu:22.04\n").2.as_deref(), Some("22.04"));
    }

    #[test]
    fn docker_hub_is_reached_at_its_api_host() {
        assert_eq!(api_host(&parse("ubuntu").unwrap()), "registry-1.docker.io");
        assert_eq!(
            api_host(&parse("127.0.0.1:5000/a").unwrap()),
            "127.0.0.1:5000"
        );
    }

    #[test]
    fn referrers_tag_replaces_only_the_algorithm_separator() {
        assert_eq!(referrers_tag(D), D.replace("sha256:", "sha256-"));
    }

    #[test]
    fn related_references_stay_in_the_same_repository() {
        let r = parse("127.0.0.1:5000/acme/app:v1").unwrap();
        assert_eq!(
            at_digest(&r, D).to_string(),
            format!("127.0.0.1:5000/acme/app@{D}")
        );
        assert_eq!(at_tag(&r, "x").to_string(), "127.0.0.1:5000/acme/app:x");
    }
}
