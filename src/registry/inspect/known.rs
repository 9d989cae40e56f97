//! What the inspector knows of an image without asking its registry, and forgetting it: an image
//! that failed with `exec format error` on a node is inspected afresh for the next pod.

use std::sync::Arc;

use super::Inspector;
use crate::platform::Platform;
use crate::registry::reference::{self, Reference};

impl Inspector {
    /// The platforms cached for `image` at `digest`, if any (no registry request).
    pub async fn cached_platforms(
        &self,
        image: &Reference,
        digest: &str,
    ) -> Option<Arc<Vec<Platform>>> {
        let pinned = reference::at_digest(image, digest);
        let key = (
            0,
            reference::api_host(&pinned).to_owned(),
            pinned.repository().to_owned(),
            digest.to_owned(),
        );
        self.shared.platforms.cache.get(&key).await
    }

    /// Drops what is cached of `image`: its tag's digest for every set of credentials, and the
    /// platforms of `digests` (what ocifit inspected, what the node ran). Returns how many
    /// entries went.
    pub async fn forget(&self, image: &Reference, digests: &[&str]) -> usize {
        let host = reference::api_host(image).to_owned();
        let repository = image.repository().to_owned();
        let tag = reference::manifest_reference(image).to_owned();
        let tags: Vec<_> = self
            .shared
            .tags
            .cache
            .iter()
            .filter(|(key, _)| key.1 == host && key.2 == repository && key.3 == tag)
            .map(|(key, _)| key)
            .collect();
        let mut gone = 0;
        for key in tags {
            gone += usize::from(self.shared.tags.cache.remove(&*key).await.is_some());
        }
        for digest in digests {
            let key = (0, host.clone(), repository.clone(), (*digest).to_owned());
            gone += usize::from(self.shared.platforms.cache.remove(&key).await.is_some());
        }
        gone
    }
}
