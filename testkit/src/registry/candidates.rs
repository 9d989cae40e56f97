//! Three candidate images of `acme/app` as `spec.artifact.candidates` lists them, each with its
//! own NFD image-compatibility artifact attached as NFD documents it (or none).

use super::{PushedImage, Registry};
use crate::error::{Result, io};

/// The artifact type of NFD's image-compatibility artifact.
const NFD_ARTIFACT: &str = "application/vnd.nfd.image-compatibility.v1alpha1";
/// The media type of its one layer.
const NFD_LAYER: &str = "application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml";
/// `fast`'s artifact: runs where the CPU has AVX-512.
const NEEDS_AVX512: &str = "version: v1alpha1\ncompatibilities:\n\
    - tag: avx512\n  description: AVX-512 build\n  rules:\n  - name: avx512\n    matchFeatures:\n\
    \x20   - feature: cpu.cpuid\n      matchExpressions:\n        AVX512F: {op: Exists}\n";
/// `portable`'s artifact: runs anywhere.
const ANYWHERE: &str = "version: v1alpha1\ncompatibilities:\n- tag: portable\n  rules: []\n";

/// The candidates [`Registry::push_candidates`] pushed.
pub struct Candidates {
    /// `acme/app:fast`, linux/amd64, needing AVX-512.
    pub fast: PushedImage,
    /// `acme/app:portable`, an index of the platforms asked for, running anywhere.
    pub portable: PushedImage,
    /// `acme/app:bare`, linux/amd64, with no artifact.
    pub bare: PushedImage,
}

impl Registry {
    /// Pushes `acme/app`'s three candidates ([`Candidates`]), `portable` an index of
    /// `portable_platforms`, and attaches their NFD artifacts with regctl.
    pub async fn push_candidates(&self, portable_platforms: &[&str]) -> Result<Candidates> {
        let fast = self
            .push_multi_platform("acme/app", "fast", &["linux/amd64"])
            .await?;
        let portable = self
            .push_multi_platform("acme/app", "portable", portable_platforms)
            .await?;
        let bare = self.push_image("acme/app", "bare", "linux/amd64").await?;
        for (image, file, content) in [
            (&fast, "avx512.yaml", NEEDS_AVX512),
            (&portable, "anywhere.yaml", ANYWHERE),
        ] {
            let path = self.dir().join(file);
            std::fs::write(&path, content).map_err(io("write an NFD artifact", &path))?;
            self.attach_artifact(&image.reference, NFD_ARTIFACT, &path, NFD_LAYER)
                .await?;
        }
        Ok(Candidates {
            fast,
            portable,
            bare,
        })
    }
}
