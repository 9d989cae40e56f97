//! How a lookup reaches a registry: a slot of its namespace and one of the inspector, a client
//! per registry and credentials (tried in order, the next after a refusal), and the lookup's
//! deadline over all of it; each outcome feeds the registry's backoff.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;

use super::{ClientKey, Inspector, lock, scope};
use crate::registry::client::Registry;
use crate::registry::docker_config::{Credentials, DockerConfig};
use crate::registry::error::{Error, ErrorKind};
use crate::registry::reference::{self, Reference};

impl Inspector {
    /// Runs `call` with each candidate's client in turn (anonymous when none) until one is not
    /// refused, within the namespace's and the inspector's slots and the lookup's deadline; the
    /// registry's own outcome feeds its backoff (waiting for a slot says nothing of it).
    pub(super) async fn with_credentials<T, F, Fut>(
        &self,
        image: &Reference,
        credentials: &[Credentials],
        (namespace, deadline): (&str, Instant),
        call: F,
    ) -> Result<T, Error>
    where
        F: Fn(Registry, Reference) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let deadline = tokio::time::Instant::from_std(deadline);
        let slots = async {
            // A semaphore here is never closed; without a permit the call would still run.
            let own = self.namespace_slots(namespace).acquire_owned().await.ok();
            let shared = self.shared.limit.acquire().await.ok();
            (own, shared)
        };
        let Ok(_permits) = tokio::time::timeout_at(deadline, slots).await else {
            return Err(Error::Deadline {
                target: reference::target(image),
                deadline: self.shared.deadline,
                waiting_for_slot: true,
            });
        };
        let candidates: Vec<Option<&Credentials>> = if credentials.is_empty() {
            vec![None]
        } else {
            credentials.iter().map(Some).collect()
        };
        let calls = async {
            let mut result = Err(Error::NotFound {
                target: reference::target(image),
                what: "credentials",
            });
            for candidate in candidates {
                let client = self.client(image.registry(), candidate).await?;
                result = call(client, image.clone()).await;
                match &result {
                    Err(err) if err.kind() == ErrorKind::Unauthorized => continue,
                    _ => break,
                }
            }
            result
        };
        let result = tokio::time::timeout_at(deadline, calls)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Deadline {
                    target: reference::target(image),
                    deadline: self.shared.deadline,
                    waiting_for_slot: false,
                })
            });
        let host = reference::api_host(image);
        lock(&self.shared.backoffs).record(
            (host, scope(credentials)),
            result.as_ref().map(|_| ()),
            Instant::now(),
        );
        result
    }

    /// The slots of `namespace`'s lookups. Namespaces with none in flight are dropped as others
    /// come (a held permit keeps its semaphore referenced), so the map holds the active ones.
    fn namespace_slots(&self, namespace: &str) -> Arc<Semaphore> {
        let mut namespaces = lock(&self.shared.namespaces);
        if let Some(slots) = namespaces.get(namespace) {
            return Arc::clone(slots);
        }
        namespaces.retain(|_, slots| Arc::strong_count(slots) > 1);
        let slots = Arc::new(Semaphore::new(self.shared.per_namespace));
        namespaces.insert(namespace.to_owned(), Arc::clone(&slots));
        slots
    }

    async fn client(
        &self,
        registry: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Registry, Error> {
        let key: ClientKey = (
            registry.to_owned(),
            credentials.map(Credentials::fingerprint),
        );
        let build = async {
            let mut options = self.shared.template.clone();
            if let Some(credentials) = credentials {
                options.credentials = DockerConfig::for_registry(registry, credentials.clone());
            }
            Registry::new(options)
        };
        self.shared
            .clients
            .try_get_with(key, build)
            .await
            .map_err(|err| Error::clone(&err))
    }
}
