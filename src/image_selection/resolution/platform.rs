//! Whether a candidate image can run on a node class: the class's `kubernetes.io/os` and
//! `kubernetes.io/arch` against the platforms the registry read from the image, matched by the
//! one platform model, [`crate::platform`]. Pure; the lookups are the callers' (the controller
//! and `ocifit resolve`, through the registry room).

use std::collections::BTreeMap;

use crate::classes::NodeClass;
use crate::platform::{NodePlatform, Platform};

/// What is known about one candidate image's platforms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlatformLookup {
    /// The platforms the image (index or config) names.
    Known(Vec<Platform>),
    /// The platforms could not be read; the message says why (registry or reference error).
    /// The image is refused for every class.
    Failed(String),
    /// The platforms were not looked at (`ocifit resolve --offline`, or its registry could not
    /// be reached); the message says why. The image is taken to run anywhere.
    NotChecked(String),
}

/// Every candidate image's lookup, by image reference as the artifact spells it.
pub type Platforms = BTreeMap<String, PlatformLookup>;

/// Why an image does not run on a class's nodes (each class row shows it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotRunnable {
    #[error("the platforms of {image} were not looked up")]
    NotLookedUp { image: String },
    #[error("failed to read the platforms of {image}: {why}")]
    Unreadable { image: String, why: String },
    /// `offered` lists the image's platforms as it spells them, or says it offers none.
    #[error("{image} is not built for {node} (it offers {offered})")]
    NotBuiltFor {
        image: String,
        node: String,
        offered: String,
    },
}

/// `Ok` when `image` can run on the class's nodes; `Err` says why not, naming the platforms. A
/// missing os or arch label leaves that field unconstrained; nodes carry no variant label, so any
/// variant of the architecture is accepted.
pub(crate) fn runs_on(
    class: &NodeClass,
    image: &str,
    platforms: &Platforms,
) -> Result<(), NotRunnable> {
    let lookup = platforms
        .get(image)
        .ok_or_else(|| NotRunnable::NotLookedUp {
            image: image.to_owned(),
        })?;
    let found = match lookup {
        PlatformLookup::Known(found) => found,
        PlatformLookup::Failed(why) => {
            return Err(NotRunnable::Unreadable {
                image: image.to_owned(),
                why: why.clone(),
            });
        }
        PlatformLookup::NotChecked(_) => return Ok(()),
    };
    let node = NodePlatform::from_labels(&class.labels);
    if found.iter().any(|platform| platform.runs_on(&node)) {
        return Ok(());
    }
    let offered: Vec<String> = found.iter().map(ToString::to_string).collect();
    Err(NotRunnable::NotBuiltFor {
        image: image.to_owned(),
        node: node.to_string(),
        offered: if offered.is_empty() {
            "no platform".to_owned()
        } else {
            offered.join(", ")
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::{ARCH_LABEL, OS_LABEL};
    use crate::engine::NodeInputs;

    fn platform(os: &str, arch: &str, variant: Option<&str>) -> Platform {
        Platform::new(os, arch, variant, None).unwrap()
    }

    fn class(labels: &[(&str, &str)]) -> NodeClass {
        NodeClass {
            name: "c-0".into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            nodes: vec!["n".into()],
            selector: None,
            inputs: NodeInputs::default(),
        }
    }

    fn known(image: &str, found: Vec<Platform>) -> Platforms {
        Platforms::from([(image.to_owned(), PlatformLookup::Known(found))])
    }

    #[test]
    fn an_index_with_the_class_arch_runs_on_it() {
        let amd = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "amd64")]);
        let platforms = known(
            "app:v1",
            vec![
                platform("linux", "arm64", Some("v8")),
                platform("linux", "amd64", None),
            ],
        );
        assert_eq!(runs_on(&amd, "app:v1", &platforms), Ok(()));
    }

    #[test]
    fn every_spelling_of_the_class_arch_runs_on_it() {
        let arm = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "arm64")]);
        let amd = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "amd64")]);
        for (class, arch, variant) in [
            (&arm, "aarch64", None),
            (&arm, "aarch64", Some("v8")),
            (&arm, "arm64", Some("v8")),
            (&arm, "arm64", None),
            (&amd, "x86_64", None),
            (&amd, "x86-64", None),
            (&amd, "amd64", Some("v1")),
        ] {
            let platforms = known("app:v1", vec![platform("linux", arch, variant)]);
            assert_eq!(
                runs_on(class, "app:v1", &platforms),
                Ok(()),
                "{arch}/{variant:?}"
            );
        }
    }

    #[test]
    fn an_aarch64_image_is_refused_on_an_amd64_class_in_its_own_spelling() {
        let amd = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "amd64")]);
        let platforms = known("app:v1", vec![platform("linux", "aarch64", None)]);
        assert_eq!(
            runs_on(&amd, "app:v1", &platforms).unwrap_err().to_string(),
            "app:v1 is not built for linux/amd64 (it offers linux/aarch64)"
        );
    }

    #[test]
    fn an_index_without_the_class_arch_is_refused_naming_what_it_offers() {
        let arm = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "arm64")]);
        let platforms = known("app:v1", vec![platform("linux", "amd64", None)]);
        let err = runs_on(&arm, "app:v1", &platforms).unwrap_err();
        assert_eq!(
            err.to_string(),
            "app:v1 is not built for linux/arm64 (it offers linux/amd64)"
        );
    }

    #[test]
    fn the_os_must_match_too() {
        let windows = class(&[(OS_LABEL, "windows"), (ARCH_LABEL, "amd64")]);
        let platforms = known("app:v1", vec![platform("linux", "amd64", None)]);
        assert!(runs_on(&windows, "app:v1", &platforms).is_err());
    }

    #[test]
    fn any_variant_of_the_arch_is_accepted() {
        let arm = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "arm")]);
        let platforms = known("app:v1", vec![platform("linux", "arm", Some("v7"))]);
        assert_eq!(runs_on(&arm, "app:v1", &platforms), Ok(()));
    }

    #[test]
    fn a_class_without_arch_or_os_labels_is_not_constrained_on_them() {
        let bare = class(&[]);
        let platforms = known("app:v1", vec![platform("linux", "s390x", None)]);
        assert_eq!(runs_on(&bare, "app:v1", &platforms), Ok(()));
    }

    #[test]
    fn a_failed_or_missing_lookup_refuses_with_the_cause() {
        let amd = class(&[(ARCH_LABEL, "amd64")]);
        let failed = Platforms::from([(
            "app:v1".to_owned(),
            PlatformLookup::Failed("manifest unknown".into()),
        )]);
        assert_eq!(
            runs_on(&amd, "app:v1", &failed).unwrap_err().to_string(),
            "failed to read the platforms of app:v1: manifest unknown"
        );
        assert!(
            runs_on(&amd, "other:v1", &failed)
                .unwrap_err()
                .to_string()
                .contains("not looked up")
        );
    }

    #[test]
    fn an_image_whose_platforms_were_not_checked_runs_anywhere() {
        let arm = class(&[(OS_LABEL, "linux"), (ARCH_LABEL, "arm64")]);
        let platforms = Platforms::from([(
            "app:v1".to_owned(),
            PlatformLookup::NotChecked("--offline".into()),
        )]);
        assert_eq!(runs_on(&arm, "app:v1", &platforms), Ok(()));
    }

    #[test]
    fn an_image_with_no_platform_is_refused() {
        let amd = class(&[(ARCH_LABEL, "amd64")]);
        let err = runs_on(&amd, "app:v1", &known("app:v1", vec![])).unwrap_err();
        assert!(
            err.to_string().ends_with("(it offers no platform)"),
            "{err}"
        );
    }
}
