//! The one platform model: what an image says it is built for (`os/architecture[/variant]`, as
//! its index entries or config blob spell it), those spellings read as container runtimes read
//! them (`aarch64` is `arm64`, `arm64/v8` is plain `arm64`, `armhf` and plain `arm` are
//! `arm/v7`, …), and whether an image runs on a node (`kubernetes.io/os`, `kubernetes.io/arch`
//! and the variant where it is known). Every feature asks this room, so a spelling means the same
//! in image selection, placement and the registry. Pure: no I/O.

mod normal;

use std::fmt;
use std::str::FromStr;

pub use normal::NodePlatform;

pub use normal::NormalPlatform;

pub use normal::OsArch;

pub use normal::Variant;

pub use normal::architecture_name;

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

#[cfg(test)]
mod tests;
