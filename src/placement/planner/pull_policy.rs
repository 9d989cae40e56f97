//! How fresh a container's tag must be: the container's effective imagePullPolicy (the field, or
//! Kubernetes' default for it: `Always` for `:latest` or no tag, else `IfNotPresent`) picks the
//! policy's lifetime. A reference by digest needs no tag lookup at all.

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use super::policy::TagMaxAge;
use crate::registry::Reference;

/// A container's imagePullPolicy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// What a lookup of the image must respect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// The reference names a digest: its platforms never change.
    Pinned,
    /// A tag's digest may be reused while younger than this.
    MaxAge(Duration),
}

/// The container's pull policy as the kubelet applies it.
pub(crate) fn effective(container: &Container, image: &Reference) -> PullPolicy {
    match container.image_pull_policy.as_deref() {
        Some("Always") => PullPolicy::Always,
        Some("Never") => PullPolicy::Never,
        Some("IfNotPresent") => PullPolicy::IfNotPresent,
        // Unset (or a value the apiserver would reject): Kubernetes' defaulting rule.
        _ => {
            let latest = image.digest().is_none() && image.tag().is_none_or(|tag| tag == "latest");
            if latest {
                PullPolicy::Always
            } else {
                PullPolicy::IfNotPresent
            }
        }
    }
}

/// How fresh the digest of `image` must be for a container with `policy`.
pub(crate) fn freshness(image: &Reference, policy: PullPolicy, ages: &TagMaxAge) -> Freshness {
    if image.digest().is_some() {
        return Freshness::Pinned;
    }
    Freshness::MaxAge(match policy {
        PullPolicy::Always => ages.always,
        PullPolicy::IfNotPresent | PullPolicy::Never => ages.if_not_present,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::parse_reference;

    fn container(policy: Option<&str>) -> Container {
        Container {
            name: "app".into(),
            image_pull_policy: policy.map(str::to_owned),
            ..Container::default()
        }
    }

    fn ages() -> TagMaxAge {
        TagMaxAge {
            if_not_present: Duration::from_secs(86_400),
            always: Duration::ZERO,
        }
    }

    #[test]
    fn unset_policy_defaults_like_kubernetes() {
        let cases = [
            ("registry.example.com/app", PullPolicy::Always),
            ("registry.example.com/app:latest", PullPolicy::Always),
            ("registry.example.com/app:v1", PullPolicy::IfNotPresent),
            (
                "registry.example.com/app@sha256:0123456789012345678901234567890123456789012345678901234567890123",
                PullPolicy::IfNotPresent,
            ),
        ];
        for (image, expected) in cases {
            let reference = parse_reference(image).unwrap();
            assert_eq!(effective(&container(None), &reference), expected, "{image}");
        }
    }

    #[test]
    fn an_explicit_policy_wins_over_the_default() {
        let latest = parse_reference("app:latest").unwrap();
        assert_eq!(
            effective(&container(Some("IfNotPresent")), &latest),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            effective(&container(Some("Never")), &latest),
            PullPolicy::Never
        );
        let tagged = parse_reference("app:v1").unwrap();
        assert_eq!(
            effective(&container(Some("Always")), &tagged),
            PullPolicy::Always
        );
    }

    #[test]
    fn always_re_resolves_and_if_not_present_trusts_the_tag_for_long() {
        let tagged = parse_reference("app:v1").unwrap();
        assert_eq!(
            freshness(&tagged, PullPolicy::Always, &ages()),
            Freshness::MaxAge(Duration::ZERO)
        );
        assert_eq!(
            freshness(&tagged, PullPolicy::IfNotPresent, &ages()),
            Freshness::MaxAge(Duration::from_secs(86_400))
        );
        assert_eq!(
            freshness(&tagged, PullPolicy::Never, &ages()),
            Freshness::MaxAge(Duration::from_secs(86_400))
        );
        let pinned = parse_reference(
            "app:v1@sha256:0123456789012345678901234567890123456789012345678901234567890123",
        )
        .unwrap();
        assert_eq!(
            freshness(&pinned, PullPolicy::Always, &ages()),
            Freshness::Pinned
        );
    }
}
