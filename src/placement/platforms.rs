//! The platforms every container of a pod can run on. Each image's platforms (from the registry
//! room: attestation and `unknown/unknown` entries already left out) are normalized as the
//! container runtimes normalize them (`aarch64` is `arm64`, `arm64/v8` is plain `arm64`, plain
//! `arm` is `arm/v7`, `amd64/v1` is plain `amd64`); an image runs on a node of the same os and
//! architecture whose variant is at least the image's. The pod's answer, for any number of
//! containers, is each os/architecture every container offers, with the lowest variant a node
//! must have for all of them (the highest of the containers' lowest).

use std::collections::BTreeMap;
use std::fmt;

use crate::registry::Platform;

/// An operating system and architecture, as nodes label them (`kubernetes.io/os`,
/// `kubernetes.io/arch`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OsArch {
    pub os: String,
    pub architecture: String,
}

impl fmt::Display for OsArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)
    }
}

/// An architecture variant, ordered as CPUs run code: a node of a higher level runs images of
/// every lower one. Variants that are not `vN` or `vN.M` order after every level, by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// No variant: the architecture's baseline.
    Baseline,
    /// `vN.M`.
    Level(u32, u32),
    /// Any other spelling, compared by name.
    Named(String),
}

impl Variant {
    fn parse(text: &str) -> Self {
        let level = text.strip_prefix('v').and_then(|rest| {
            let (major, minor) = rest.split_once('.').unwrap_or((rest, "0"));
            Some((major.parse().ok()?, minor.parse().ok()?))
        });
        match level {
            Some((major, minor)) => Self::Level(major, minor),
            None => Self::Named(text.to_owned()),
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Baseline => Ok(()),
            Self::Level(major, 0) => write!(f, "v{major}"),
            Self::Level(major, minor) => write!(f, "v{major}.{minor}"),
            Self::Named(name) => f.write_str(name),
        }
    }
}

/// One normalized platform.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NormalPlatform {
    pub os_arch: OsArch,
    pub variant: Variant,
}

impl NormalPlatform {
    /// Normalizes a platform read from a registry.
    pub fn new(platform: &Platform) -> Self {
        let variant = platform.variant.as_deref().unwrap_or_default();
        let (architecture, variant) = match platform.architecture.as_str() {
            "x86_64" | "x86-64" | "amd64" => ("amd64", if variant == "v1" { "" } else { variant }),
            "i386" => ("386", ""),
            "aarch64" | "arm64" => (
                "arm64",
                if matches!(variant, "8" | "v8" | "v8.0") {
                    ""
                } else {
                    variant
                },
            ),
            "armhf" => ("arm", "v7"),
            "armel" => ("arm", "v6"),
            "arm" => (
                "arm",
                match variant {
                    "" | "7" => "v7",
                    "5" => "v5",
                    "6" => "v6",
                    "8" => "v8",
                    other => other,
                },
            ),
            other => (other, variant),
        };
        NormalPlatform {
            os_arch: OsArch {
                os: platform.os.to_ascii_lowercase(),
                architecture: architecture.to_owned(),
            },
            variant: if variant.is_empty() {
                Variant::Baseline
            } else {
                Variant::parse(variant)
            },
        }
    }

    /// Whether an image built for `self` runs on a node of platform `node`.
    pub fn runs_on(&self, node: &NormalPlatform) -> bool {
        self.os_arch == node.os_arch && self.variant <= node.variant
    }
}

impl fmt::Display for NormalPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.os_arch)?;
        match &self.variant {
            Variant::Baseline => Ok(()),
            variant => write!(f, "/{variant}"),
        }
    }
}

/// A container and the platforms its image is built for.
#[derive(Debug, Clone, Copy)]
pub struct ContainerImage<'a> {
    /// The container's name.
    pub name: &'a str,
    /// The image's platforms, as the registry read them.
    pub platforms: &'a [Platform],
}

/// The platforms every container shares: for each os/architecture, the lowest variant a node
/// must have. Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Common(BTreeMap<OsArch, Variant>);

impl Common {
    /// Each shared os/architecture with the lowest variant a node needs.
    pub fn platforms(&self) -> impl Iterator<Item = NormalPlatform> + '_ {
        self.0.iter().map(|(os_arch, variant)| NormalPlatform {
            os_arch: os_arch.clone(),
            variant: variant.clone(),
        })
    }

    /// Whether a node of `node`'s platform can run every container.
    pub fn allows(&self, node: &NormalPlatform) -> bool {
        self.0
            .get(&node.os_arch)
            .is_some_and(|needed| *needed <= node.variant)
    }

    /// The shared os/architectures.
    pub fn os_arches(&self) -> impl Iterator<Item = &OsArch> {
        self.0.keys()
    }

    /// Keeps the os/architectures `keep` accepts; `None` when none is left.
    pub fn retain(&self, keep: impl Fn(&OsArch) -> bool) -> Option<Common> {
        let kept: BTreeMap<OsArch, Variant> = self
            .0
            .iter()
            .filter(|(os_arch, _)| keep(os_arch))
            .map(|(os_arch, variant)| (os_arch.clone(), variant.clone()))
            .collect();
        (!kept.is_empty()).then_some(Common(kept))
    }
}

impl fmt::Display for Common {
    /// `linux/amd64,linux/arm/v7`: the form of the platforms annotation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, platform) in self.platforms().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{platform}")?;
        }
        Ok(())
    }
}

/// The containers' images have no platform in common: what each offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    /// Each container with its normalized platforms, in the pod's order.
    pub offers: Vec<(String, Vec<NormalPlatform>)>,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no platform suits every container: ")?;
        for (index, (container, platforms)) in self.offers.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{container} runs on ")?;
            if platforms.is_empty() {
                f.write_str("no platform")?;
            }
            for (at, platform) in platforms.iter().enumerate() {
                if at > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{platform}")?;
            }
        }
        Ok(())
    }
}

/// The platforms every one of `containers` can run on, or what each offers when they share none.
pub fn intersect(containers: &[ContainerImage<'_>]) -> Result<Common, Disagreement> {
    let normalized: Vec<(String, Vec<NormalPlatform>)> = containers
        .iter()
        .map(|container| {
            let mut platforms: Vec<NormalPlatform> = container
                .platforms
                .iter()
                .map(NormalPlatform::new)
                .collect();
            platforms.sort();
            platforms.dedup();
            (container.name.to_owned(), platforms)
        })
        .collect();
    // Per container, the lowest variant it offers on each os/architecture.
    let lowest = |platforms: &[NormalPlatform]| {
        let mut lowest: BTreeMap<OsArch, Variant> = BTreeMap::new();
        for platform in platforms {
            lowest
                .entry(platform.os_arch.clone())
                .and_modify(|v| *v = v.clone().min(platform.variant.clone()))
                .or_insert_with(|| platform.variant.clone());
        }
        lowest
    };
    let mut iter = normalized.iter();
    let mut shared = match iter.next() {
        Some((_, platforms)) => lowest(platforms),
        None => BTreeMap::new(),
    };
    for (_, platforms) in iter {
        let theirs = lowest(platforms);
        shared = shared
            .into_iter()
            .filter_map(|(os_arch, ours)| {
                let needed = theirs.get(&os_arch)?;
                Some((os_arch, ours.max(needed.clone())))
            })
            .collect();
    }
    if shared.is_empty() {
        return Err(Disagreement { offers: normalized });
    }
    Ok(Common(shared))
}

#[cfg(test)]
mod tests;
