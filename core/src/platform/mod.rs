//! The one platform model: what an image says it is built for (`os/architecture[/variant]`, as
//! its index entries or config blob spell it), those spellings read as container runtimes read
//! them (containerd's normalization, the OCI image spec's values, what `uname -m` and Debian
//! call the same CPUs: `aarch64` is `arm64`, `armhf` and plain `arm` are `arm/v7`, …), and
//! whether an image runs on a node (`kubernetes.io/os`, `kubernetes.io/arch` and the variant
//! where it is known). Every feature asks this room, so a spelling means the same
//! in image selection, placement and the registry. Pure: no I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The node label holding the CPU architecture.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// The node label holding the operating system.
pub const OS_LABEL: &str = "kubernetes.io/os";

/// The longest os, architecture, variant or os.version taken; real ones are a few characters
/// (`linux`, `arm64`, `v8`, `10.0.20348.2227`). A longer one is not a platform.
pub const MAX_FIELD_CHARS: usize = 64;

/// One platform an image is built for, spelled as the image spells it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
    pub os_version: Option<String>,
}

/// Why some text or fields are not a platform.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    /// The os or the architecture is empty or `unknown` (attestation entries say `unknown`).
    #[error("the {0} is empty or unknown")]
    Unknown(&'static str),
    /// A field is too long, or holds spaces or control characters.
    #[error(
        "the {0} is not a short printable word (at most {MAX_FIELD_CHARS} characters, no spaces or control characters)"
    )]
    NotAWord(&'static str),
    /// Text that is not `os/architecture[/variant]`.
    #[error("a platform is written os/architecture[/variant], e.g. linux/arm64 or linux/arm/v7")]
    Shape,
}

impl Platform {
    /// A platform from an image's fields. Platforms end up in status messages and annotations,
    /// so only short printable words are taken; an empty variant or os.version is none.
    pub fn new(
        os: &str,
        architecture: &str,
        variant: Option<&str>,
        os_version: Option<&str>,
    ) -> Result<Self, PlatformError> {
        for (field, value) in [("os", os), ("architecture", architecture)] {
            if value.is_empty() || value == "unknown" {
                return Err(PlatformError::Unknown(field));
            }
        }
        let word = |s: &str| {
            s.chars().count() <= MAX_FIELD_CHARS
                && !s.chars().any(|c| c.is_control() || c.is_whitespace())
        };
        for (field, value) in [
            ("os", Some(os)),
            ("architecture", Some(architecture)),
            ("variant", variant),
            ("os.version", os_version),
        ] {
            if value.is_some_and(|value| !word(value)) {
                return Err(PlatformError::NotAWord(field));
            }
        }
        let present = |s: Option<&str>| s.filter(|v| !v.is_empty()).map(str::to_owned);
        Ok(Platform {
            os: os.to_owned(),
            architecture: architecture.to_owned(),
            variant: present(variant),
            os_version: present(os_version),
        })
    }

    /// The platform as container runtimes read it.
    pub fn normalized(&self) -> NormalPlatform {
        NormalPlatform::new(self)
    }

    /// Whether an image built for this platform runs on `node`.
    pub fn runs_on(&self, node: &NodePlatform) -> bool {
        self.normalized().runs_on(node)
    }
}

impl FromStr for Platform {
    type Err = PlatformError;

    /// `os/architecture[/variant]`, as `docker --platform` and OCI tools write it.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = text.split('/').collect();
        match parts.as_slice() {
            [os, architecture] => Platform::new(os, architecture, None, None),
            [os, architecture, variant] if !variant.is_empty() => {
                Platform::new(os, architecture, Some(variant), None)
            }
            _ => Err(PlatformError::Shape),
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        if let Some(version) = &self.os_version {
            write!(f, " ({version})")?;
        }
        Ok(())
    }
}

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
/// every lower one. Variants that are not `vN` or `vN.M` (the `v` may be left out) order after
/// every level, by name.
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
    /// Reads a variant spelling (already lower case); empty is the baseline.
    fn parse(text: &str) -> Self {
        if text.is_empty() {
            return Self::Baseline;
        }
        let digits = text.strip_prefix('v').unwrap_or(text);
        let (major, minor) = digits.split_once('.').unwrap_or((digits, "0"));
        match (major.parse(), minor.parse()) {
            (Ok(major), Ok(minor)) => Self::Level(major, minor),
            _ => Self::Named(text.to_owned()),
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

/// The operating system as runtimes name it.
fn os(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "macos" => "darwin".to_owned(),
        _ => lower,
    }
}

/// The architecture as runtimes (and `kubernetes.io/arch`) name it, and the variant its
/// spelling implies (`armhf` is ARMv7).
fn architecture(name: &str) -> (String, Option<Variant>) {
    let lower = name.to_ascii_lowercase();
    let (name, implied) = match lower.as_str() {
        "amd64" | "x86_64" | "x86-64" => ("amd64", None),
        "386" | "i386" | "i486" | "i586" | "i686" => ("386", None),
        "arm64" | "aarch64" => ("arm64", None),
        "arm" => ("arm", None),
        "armhf" | "armv7" | "armv7l" | "armv7hl" => ("arm", Some(7)),
        "armel" | "armv6" | "armv6l" => ("arm", Some(6)),
        "armv5" | "armv5l" | "armv5tel" | "armv5tejl" => ("arm", Some(5)),
        // 32-bit code on a 64-bit ARM CPU.
        "armv8l" => ("arm", Some(8)),
        "ppc64le" | "ppc64el" => ("ppc64le", None),
        "mips64le" | "mips64el" => ("mips64le", None),
        "mipsle" | "mipsel" => ("mipsle", None),
        "loong64" | "loongarch64" => ("loong64", None),
        other => (other, None),
    };
    (
        name.to_owned(),
        implied.map(|major| Variant::Level(major, 0)),
    )
}

/// The architecture as runtimes and `kubernetes.io/arch` name it, whatever its spelling
/// (`aarch64` is `arm64`, `x86_64` is `amd64`, `armhf` is `arm`).
pub fn architecture_name(name: &str) -> String {
    architecture(name).0
}

/// One platform as runtimes read it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NormalPlatform {
    pub os_arch: OsArch,
    pub variant: Variant,
}

impl NormalPlatform {
    /// Reads a platform as containerd does: spellings of one architecture are one name, the
    /// architecture's baseline variant is no variant (`amd64/v1`, `arm64/v8`), plain `arm` is
    /// `arm/v7`, and `386` has no variants.
    pub fn new(platform: &Platform) -> Self {
        let (architecture, implied) = architecture(&platform.architecture);
        let written = platform
            .variant
            .as_deref()
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        let variant = implied.unwrap_or_else(|| Variant::parse(&written));
        let variant = match (architecture.as_str(), variant) {
            ("amd64", Variant::Level(1, 0)) | ("arm64", Variant::Level(8, 0)) | ("386", _) => {
                Variant::Baseline
            }
            ("arm", Variant::Baseline) => Variant::Level(7, 0),
            (_, variant) => variant,
        };
        NormalPlatform {
            os_arch: OsArch {
                os: os(&platform.os),
                architecture,
            },
            variant,
        }
    }

    /// Whether an image built for `self` runs on `node`: the same os and architecture, and a
    /// node variant at least the image's where the node's variant is known.
    pub fn runs_on(&self, node: &NodePlatform) -> bool {
        node.os.as_ref().is_none_or(|os| *os == self.os_arch.os)
            && node
                .architecture
                .as_ref()
                .is_none_or(|architecture| *architecture == self.os_arch.architecture)
            && node
                .variant
                .as_ref()
                .is_none_or(|variant| self.variant <= *variant)
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

/// What is known of a node's platform, normalized; a field not known does not constrain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlatform {
    /// `kubernetes.io/os`.
    pub os: Option<String>,
    /// `kubernetes.io/arch`.
    pub architecture: Option<String>,
    /// The CPU variant, when known: a node of unknown variant runs any variant of its
    /// architecture.
    pub variant: Option<Variant>,
}

impl NodePlatform {
    /// A node's platform from its labels. Kubernetes labels no CPU variant
    /// (`kubernetes.io/arch` is `arm`, never `arm/v7`), so the variant is unknown.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        NodePlatform {
            os: labels.get(OS_LABEL).map(|name| os(name)),
            architecture: labels.get(ARCH_LABEL).map(|name| architecture_name(name)),
            variant: None,
        }
    }

    /// A node of exactly this platform, its variant known.
    pub fn exactly(platform: &NormalPlatform) -> Self {
        NodePlatform {
            os: Some(platform.os_arch.os.clone()),
            architecture: Some(platform.os_arch.architecture.clone()),
            variant: Some(platform.variant.clone()),
        }
    }
}

impl fmt::Display for NodePlatform {
    /// `linux/arm64`; `any` for what is not known, e.g. `any/amd64`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let any = |field: &Option<String>| field.clone().unwrap_or_else(|| "any".to_owned());
        write!(f, "{}/{}", any(&self.os), any(&self.architecture))?;
        match &self.variant {
            None | Some(Variant::Baseline) => Ok(()),
            Some(variant) => write!(f, "/{variant}"),
        }
    }
}

#[cfg(test)]
mod tests;
