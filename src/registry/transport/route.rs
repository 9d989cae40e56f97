//! Where a read goes: the registry its reference names, or the hosts its `hosts.toml` lists, tried
//! in order as containerd tries them. This is the one place a registry's host becomes a request's
//! URL for reads, so tag resolution, manifests, blobs and referrers all go through the mirrors.

use reqwest::Url;

use super::{Answer, FencedClient, Request, Transport};
use crate::registry::error::{ConfigError, Error, Refusal};
use crate::registry::mirrors::Endpoint;

/// One host a request is sent to, and the rules that go with it.
pub(super) struct Via<'a> {
    /// `host[:port]`: tokens and Basic are kept per host.
    pub host: &'a str,
    /// `scheme://host[:port]` and the API root the request's `/v2` stands for.
    origin: String,
    root: &'a str,
    /// The registry a mirror is told it serves (`ns=`, as containerd adds it).
    ns: Option<&'a str>,
    pub http: &'a FencedClient,
    /// The hosts whose token realms and redirects may be plain HTTP.
    pub plain_http: &'a [String],
    /// Whose credentials are sent: the registry's, or the mirror's own host's.
    pub credentials_for: &'a str,
}

impl Via<'_> {
    /// The URL of a request path (`/v2/…`) at this host.
    pub(super) fn url(&self, path: &str) -> Result<Url, String> {
        let below = path.strip_prefix("/v2").unwrap_or(path);
        let mut url = Url::parse(&format!("{}{}{below}", self.origin, self.root))
            .map_err(|err| err.to_string())?;
        if let Some(ns) = self.ns {
            url.query_pairs_mut().append_pair("ns", ns);
        }
        Ok(url)
    }
}

impl Transport {
    /// Sends a read to the registry, or to each host its `hosts.toml` lists for the need, in
    /// order, the next after any failure (as containerd does). When all fail, the first failure
    /// that was not a 404 is the answer (a down mirror is not a missing image), else the 404.
    pub(crate) async fn fetch(&self, request: &Request<'_>) -> Result<Answer, Error> {
        let registry = &request.target.registry;
        if !self.link.allowed.allows(registry) {
            return Err(Error::NotAllowed {
                target: request.target.clone(),
                host: registry.clone(),
                why: Refusal::Registry,
            });
        }
        let Some(endpoints) = self
            .link
            .mirrors
            .route(registry, request.host, request.need)
        else {
            return self
                .fetch_via(request, &self.direct(request.host, registry))
                .await;
        };
        let (mut failed, mut missing) = (None, None);
        for endpoint in &endpoints {
            let via = self.via(endpoint, registry);
            match self.fetch_via(request, &via).await {
                Ok(answer) => return Ok(answer),
                Err(err) => {
                    tracing::info!(target = %request.target, host = %endpoint.host, error = %err, "trying the next host of the registry's hosts.toml");
                    match err {
                        Error::NotFound { .. } => missing.get_or_insert(err),
                        err => failed.get_or_insert(err),
                    };
                }
            }
        }
        Err(failed.or(missing).unwrap_or_else(|| {
            ConfigError::NoMirrorHost {
                registry: registry.clone(),
                need: request.need.as_str(),
            }
            .into()
        }))
    }

    /// The registry itself, as its flags say.
    pub(super) fn direct<'a>(&'a self, host: &'a str, registry: &'a str) -> Via<'a> {
        let plain = self.link.plain_http.iter().any(|h| h == host);
        Via {
            host,
            origin: origin(host, plain),
            root: "/v2",
            ns: None,
            http: &self.link.http,
            plain_http: &self.link.plain_http,
            credentials_for: registry,
        }
    }

    /// A host of a `hosts.toml`: a mirror gets its own fence, credentials and `ns=`.
    fn via<'a>(&'a self, endpoint: &'a Endpoint, registry: &'a str) -> Via<'a> {
        if !endpoint.mirror {
            let mut via = self.direct(&endpoint.host, registry);
            if let Some(plain) = endpoint.plain_http {
                via.origin = origin(&endpoint.host, plain);
            }
            via.root = &endpoint.root;
            return via;
        }
        Via {
            host: &endpoint.host,
            origin: origin(&endpoint.host, endpoint.plain_http.unwrap_or(false)),
            root: &endpoint.root,
            ns: Some(registry),
            http: &self.link.mirror_http,
            plain_http: &self.link.mirror_plain_http,
            credentials_for: &endpoint.host,
        }
    }
}

fn origin(host: &str, plain_http: bool) -> String {
    format!("{}://{host}", if plain_http { "http" } else { "https" })
}
