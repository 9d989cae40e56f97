//! The one outbound fence: every HTTP client ocifit builds is built here (a component test,
//! `tests/components/outbound.rs`, fails on one built anywhere else). Its names resolve through
//! one resolver that hands the connection only addresses the private registries' list admits, so
//! what was checked is what is connected to (no second lookup to rebind) and a failed lookup
//! fails the request; an address written in a URL, which the HTTP client connects to without
//! asking the resolver, is checked before every request and every redirect. Proxies are not
//! used: a proxy would connect to addresses the fence never sees.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Method, RequestBuilder, Response, Url};

use super::addresses::PrivateRegistries;
use super::allow::url_host;
use super::error::{ConfigError, Refusal};

/// Redirects followed for one request, as browsers and reqwest's default policy allow.
const MAX_REDIRECTS: usize = 10;

/// A host the fence, or a redirect rule, refused; carried through the HTTP client's error.
#[derive(Debug, thiserror::Error)]
#[error("refused to reach {host}: {why}")]
pub(crate) struct Refused {
    pub(crate) host: String,
    pub(crate) why: Refusal,
}

/// Whether a redirect from the second URL to the first may be followed (beyond the fence).
pub(crate) type RedirectRule = Box<dyn Fn(&Url, &Url) -> Result<(), Refusal> + Send + Sync>;

/// How a client is set up.
pub(crate) struct ClientSettings<'a> {
    pub(crate) connect_timeout: Duration,
    pub(crate) extra_ca_pem: &'a [Vec<u8>],
    pub(crate) redirect: RedirectRule,
    pub(crate) private: PrivateRegistries,
}

/// Why a request was not answered.
pub(crate) enum SendError {
    /// The fence refused the URL before anything was sent.
    Refused(Refused),
    /// The HTTP client failed (a refusal at connect time or on a redirect is in its causes).
    Http(reqwest::Error),
}

/// An HTTP client behind the fence. Cheap to clone.
#[derive(Clone)]
pub(crate) struct FencedClient {
    http: reqwest::Client,
    private: Arc<PrivateRegistries>,
}

impl FencedClient {
    /// Builds the client; fails only on unusable TLS configuration.
    pub(crate) fn new(settings: ClientSettings<'_>) -> Result<FencedClient, ConfigError> {
        // reqwest is built without a crypto provider so it shares kube's ring; make sure one is
        // installed (a second install is refused, which is fine).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let private = Arc::new(settings.private);
        let fence = Arc::clone(&private);
        let rule = settings.redirect;
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                return attempt.error("too many redirects");
            }
            let next = attempt.url();
            let checked = attempt
                .previous()
                .last()
                .map_or(Ok(()), |previous| rule(next, previous))
                .and_then(|()| fence.admits_url(next));
            match checked {
                Ok(()) => attempt.follow(),
                Err(why) => {
                    let host = url_host(next).unwrap_or_default();
                    attempt.error(Refused { host, why })
                }
            }
        });
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .redirect(redirects)
            .dns_resolver(FencedResolver {
                private: Arc::clone(&private),
            })
            .no_proxy()
            .user_agent(concat!("ocifit/", env!("CARGO_PKG_VERSION")));
        for pem in settings.extra_ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|err| ConfigError::Http(format!("invalid CA certificate: {err}")))?;
            builder = builder.tls_certs_merge(certs);
        }
        let http = builder
            .build()
            .map_err(|err| ConfigError::Http(err.to_string()))?;
        Ok(FencedClient { http, private })
    }

    /// A request to `url`, to be sent with [`FencedClient::send`].
    pub(crate) fn request(&self, method: Method, url: Url) -> RequestBuilder {
        self.http.request(method, url)
    }

    /// Sends a request made by [`FencedClient::request`], through this client whichever made
    /// it, once the fence admits its URL.
    pub(crate) async fn send(&self, builder: RequestBuilder) -> Result<Response, SendError> {
        let (_, request) = builder.build_split();
        let request = request.map_err(SendError::Http)?;
        if let Err(why) = self.private.admits_url(request.url()) {
            let host = url_host(request.url()).unwrap_or_default();
            return Err(SendError::Refused(Refused { host, why }));
        }
        self.http.execute(request).await.map_err(SendError::Http)
    }
}

/// The resolver of every fenced client: the system's lookup, then only the admitted addresses.
struct FencedResolver {
    private: Arc<PrivateRegistries>,
}

impl Resolve for FencedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let private = Arc::clone(&self.private);
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            match private.admit_addresses(&name, found) {
                Ok(admitted) => Ok(Box::new(admitted.into_iter()) as Addrs),
                Err(why) => Err(Box::new(Refused { host: name, why }) as _),
            }
        })
    }
}
