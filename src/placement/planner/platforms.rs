//! The platforms every container of a pod can run on: placement's own question, the
//! intersection across containers. Each image's platforms (from the registry room, attestations
//! already left out) are read by the one platform model, [`crate::platform`]. The pod's answer is
//! each os/architecture every container offers, with the lowest variant a node must have for all
//! of them (the highest of the containers' lowest).

use std::collections::BTreeMap;
use std::fmt;

use crate::platform::{NodePlatform, NormalPlatform, OsArch, Platform, Variant};

/// A container and the platforms its image is built for.
#[derive(Debug, Clone, Copy)]
pub struct ContainerImage<'a> {
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
    pub fn allows(&self, node: &NodePlatform) -> bool {
        self.platforms().any(|platform| platform.runs_on(node))
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
                .map(Platform::normalized)
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
