//! The HTTP adapter: one registry request with its timeout, authentication handshake (anonymous,
//! Basic, bearer token), retries of transient failures, size cap, and classification of the
//! answer; where it may go (allowed registries, token realms, redirects) and how many requests
//! run at once. Decisions live in `allow`, `auth`, `retry` and `docker_config`; this file only
//! moves bytes.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use tokio::sync::Semaphore;

use super::addresses::PrivateRegistries;
use super::allow::{AllowList, url_host};
use super::auth::{self, Challenge};
use super::docker_config::{Credentials, DockerConfig};
use super::error::{Access, ContentProblem, Error, Target};
use super::fence::{ClientSettings, FencedClient, SendError};
use super::mirrors::{Mirrors, Need};
use super::options::RegistryOptions;
use super::retry::{self, Decision, RetryPolicy};
use super::stats::Counters;

mod exchange;
mod failures;
mod route;

use super::auth::Tokens;
pub(crate) use exchange::Exchange;
use failures::{AttemptError, read_body, status_error, transport_error, unauthorized};
use route::Via;

/// One request: where, what, and how much may come back.
pub(crate) struct Request<'a> {
    pub target: &'a Target,
    /// Host (with port) serving the registry API.
    pub host: &'a str,
    /// Path below the host, starting with `/v2/`.
    pub path: String,
    pub accept: &'a [&'a str],
    pub head: bool,
    /// Most bytes to read.
    pub limit: u64,
    /// What a 404 means ("manifest", "blob", …).
    pub what: &'static str,
    /// What a 401 or 403 refused.
    pub access: Access,
    /// What it asks of a registry's mirrors: content by digest, or a name's resolution.
    pub need: Need,
}

/// A successful answer.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub body: Bytes,
    pub content_type: Option<String>,
    pub digest: Option<String>,
}

/// What every client made from one root shares: connections, where requests may go, the bound on
/// requests in flight, and the counters.
struct Link {
    http: FencedClient,
    /// The fence admitting the mirrors' hosts as well: for requests to a mirror only, so a pod
    /// naming a mirror's host as its registry is fenced as any other host.
    mirror_http: FencedClient,
    mirrors: Mirrors,
    plain_http: Vec<String>,
    /// `plain_http` and the mirrors' plain-HTTP hosts: the realm and redirect rules at a mirror.
    mirror_plain_http: Vec<String>,
    allowed: AllowList,
    retry: RetryPolicy,
    request_timeout: Duration,
    /// One permit per request in flight, over every client of the root.
    permits: Semaphore,
    counters: Arc<Counters>,
}

pub(crate) struct Transport {
    link: Arc<Link>,
    credentials: DockerConfig,
    tokens: Mutex<Tokens>,
    /// Hosts that asked for Basic: later requests send it at once instead of a 401 round trip.
    basic_hosts: Mutex<HashSet<String>>,
}

impl Transport {
    /// The transport the client's `options` describe (the caches and read limits are the client's).
    pub(crate) fn new(options: &RegistryOptions) -> Result<Self, Error> {
        let http = fenced(options, options.plain_http.clone(), options.private.clone())?;
        let mirror_hosts = options.mirrors.hosts();
        let mut mirror_plain_http = options.plain_http.clone();
        mirror_plain_http.extend(
            mirror_hosts
                .iter()
                .filter(|(_, plain)| *plain)
                .map(|(host, _)| host.clone()),
        );
        let mirror_http = if mirror_hosts.is_empty() {
            http.clone()
        } else {
            let hosts: Vec<&str> = mirror_hosts.iter().map(|(host, _)| host.as_str()).collect();
            let private = options
                .private
                .clone()
                .and(&PrivateRegistries::parse(&hosts)?);
            fenced(options, mirror_plain_http.clone(), private)?
        };
        let link = Link {
            http,
            mirror_http,
            mirrors: options.mirrors.clone(),
            mirror_plain_http,
            plain_http: options.plain_http.clone(),
            allowed: options.allowed.clone(),
            retry: options.retry,
            request_timeout: options.request_timeout,
            permits: Semaphore::new(options.max_concurrent_requests.max(1)),
            counters: Arc::default(),
        };
        Ok(Transport::over(Arc::new(link), options.credentials.clone()))
    }

    fn over(link: Arc<Link>, credentials: DockerConfig) -> Self {
        Transport {
            link,
            credentials,
            tokens: Mutex::default(),
            basic_hosts: Mutex::default(),
        }
    }

    /// A transport with other credentials over the same connections, rules and request bound.
    pub(crate) fn with_credentials(&self, credentials: DockerConfig) -> Self {
        Transport::over(Arc::clone(&self.link), credentials)
    }

    /// The counters shared by every transport of the root.
    pub(crate) fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.link.counters)
    }

    /// Which credentials this transport presents for `registry/repository`, as a cache scope: 0
    /// when anonymous, else a fingerprint of the credentials.
    pub(crate) fn scope(&self, registry: &str, repository: &str) -> u128 {
        self.credentials
            .lookup(registry, repository)
            .map_or(0, Credentials::fingerprint)
    }

    /// Sends a request to one host (the registry, or one of its mirrors), retrying transient
    /// failures as the retry policy says.
    async fn fetch_via(&self, request: &Request<'_>, via: &Via<'_>) -> Result<Answer, Error> {
        let mut attempt = 1;
        loop {
            match self.attempt(request, via).await {
                Ok(answer) => return Ok(answer),
                Err(AttemptError {
                    error,
                    failure: Some(failure),
                }) => match retry::decide(&self.link.retry, attempt, failure) {
                    Decision::RetryIn(delay) => {
                        tracing::debug!(target = %request.target, attempt, ?delay, %error, "retrying registry request");
                        tokio::time::sleep(delay).await;
                    }
                    Decision::GiveUp => return Err(error),
                },
                Err(AttemptError { error, .. }) => return Err(error),
            }
            attempt += 1;
        }
    }

    async fn attempt(&self, request: &Request<'_>, via: &Via<'_>) -> Result<Answer, AttemptError> {
        // Held for the attempt's requests (and its token request), never while waiting for
        // another permit, so the bound cannot deadlock. The semaphore is never closed.
        let _permit = self.link.permits.acquire().await.ok();
        let repository = &request.target.repository;
        let credentials = self.credentials.lookup(via.credentials_for, repository);
        let mut authorization = self.known_authorization(via.host, repository, credentials);
        let mut response = self.send(request, via, authorization.as_ref()).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            authorization = Some(
                self.answer_challenge(request, via, &response, credentials)
                    .await?,
            );
            response = self.send(request, via, authorization.as_ref()).await?;
        }
        self.answer(request, response).await
    }

    /// The authorization a 401 answer asks for: a bearer token fetched from its realm, or Basic.
    async fn answer_challenge(
        &self,
        request: &Request<'_>,
        via: &Via<'_>,
        response: &Response,
        credentials: Option<&Credentials>,
    ) -> Result<Authorization, AttemptError> {
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(auth::parse_challenge);
        match (challenge, credentials) {
            (
                Some(Challenge::Bearer {
                    realm,
                    service,
                    scope,
                }),
                _,
            ) => {
                let scope = auth::token_scope(&request.target.repository, scope.as_deref());
                let token = self
                    .fetch_token(
                        request,
                        via,
                        &realm,
                        (service.as_deref(), &scope),
                        credentials,
                    )
                    .await?;
                Ok(Authorization::Bearer(token))
            }
            (Some(Challenge::Basic), Some(Credentials::Basic { username, password })) => {
                lock(&self.basic_hosts).insert(via.host.to_string());
                Ok(Authorization::Basic(username.clone(), password.clone()))
            }
            _ => Err(unauthorized(request.target, 401, request.access).into()),
        }
    }

    /// Authorization to send before being challenged: a registry token, Basic for hosts known to
    /// want it, or a bearer token still valid for this repository.
    fn known_authorization(
        &self,
        host: &str,
        repository: &str,
        credentials: Option<&Credentials>,
    ) -> Option<Authorization> {
        match credentials {
            Some(Credentials::Bearer(token)) => return Some(Authorization::Bearer(token.clone())),
            Some(Credentials::Basic { username, password })
                if lock(&self.basic_hosts).contains(host) =>
            {
                return Some(Authorization::Basic(username.clone(), password.clone()));
            }
            _ => {}
        }
        lock(&self.tokens)
            .get(host, repository, Instant::now())
            .map(Authorization::Bearer)
    }

    async fn fetch_token(
        &self,
        request: &Request<'_>,
        via: &Via<'_>,
        realm: &str,
        (service, scope): (Option<&str>, &str),
        credentials: Option<&Credentials>,
    ) -> Result<String, AttemptError> {
        let realm = Url::parse(realm)
            .ok()
            .filter(|url| matches!(url.scheme(), "https" | "http"))
            .ok_or_else(|| {
                Error::content(
                    request.target,
                    ContentProblem::Protocol("the token realm is not an HTTP(S) URL".into()),
                )
            })?;
        auth::check_realm(&realm, via.host, via.plain_http, &self.link.allowed).map_err(|why| {
            Error::NotAllowed {
                target: request.target.clone(),
                host: url_host(&realm).unwrap_or_default(),
                why,
            }
        })?;
        let builder = match credentials {
            Some(Credentials::IdentityToken(refresh)) => via
                .http
                .request(Method::POST, realm)
                .form(&auth::refresh_token_form(service, scope, refresh)),
            _ => {
                let mut query = vec![("scope", scope)];
                if let Some(service) = service {
                    query.push(("service", service));
                }
                let builder = via.http.request(Method::GET, realm).query(&query);
                match credentials {
                    Some(Credentials::Basic { username, password }) => {
                        builder.basic_auth(username, Some(password))
                    }
                    Some(Credentials::Bearer(token)) => builder.bearer_auth(token),
                    _ => builder,
                }
            }
        }
        .timeout(self.link.request_timeout);
        let response = self.send_builder(request.target, via.http, builder).await?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(unauthorized(request.target, status.as_u16(), request.access).into());
        }
        if !status.is_success() {
            return Err(status_error(request.target, &response, "token"));
        }
        let body = read_body(request.target, response, 64 * 1024).await?;
        let token = auth::parse_token_response(&body).ok_or_else(|| {
            Error::content(
                request.target,
                ContentProblem::Protocol("the token endpoint answered without a token".into()),
            )
        })?;
        let now = Instant::now();
        lock(&self.tokens).insert(
            (via.host.to_string(), request.target.repository.clone()),
            token.value.clone(),
            now.checked_add(token.lifetime).unwrap_or(now),
            now,
        );
        Ok(token.value)
    }

    async fn send(
        &self,
        request: &Request<'_>,
        via: &Via<'_>,
        authorization: Option<&Authorization>,
    ) -> Result<Response, AttemptError> {
        let url = via.url(&request.path).map_err(|err| {
            Error::content(
                request.target,
                ContentProblem::Protocol(format!("unusable request URL: {err}")),
            )
        })?;
        let method = if request.head {
            Method::HEAD
        } else {
            Method::GET
        };
        let mut builder = via
            .http
            .request(method, url)
            .header(ACCEPT, request.accept.join(", "))
            .timeout(self.link.request_timeout);
        builder = match authorization {
            Some(Authorization::Basic(username, password)) => {
                builder.basic_auth(username, Some(password))
            }
            Some(Authorization::Bearer(token)) => builder.bearer_auth(token),
            None => builder,
        };
        self.send_builder(request.target, via.http, builder).await
    }

    async fn send_builder(
        &self,
        target: &Target,
        http: &FencedClient,
        builder: RequestBuilder,
    ) -> Result<Response, AttemptError> {
        let counters = &self.link.counters;
        counters.requests.fetch_add(1, Ordering::Relaxed);
        let result = http.send(builder).await;
        counters.answered(result.as_ref().ok().map(|r| r.status().as_u16()));
        result.map_err(|err| match err {
            SendError::Refused(refused) => Error::NotAllowed {
                target: target.clone(),
                host: refused.host,
                why: refused.why,
            }
            .into(),
            SendError::Http(err) => transport_error(target, err),
        })
    }

    async fn answer(
        &self,
        request: &Request<'_>,
        response: Response,
    ) -> Result<Answer, AttemptError> {
        let status = response.status();
        let target = request.target;
        match status {
            s if s.is_success() => {}
            StatusCode::NOT_FOUND => {
                return Err(Error::NotFound {
                    target: target.clone(),
                    what: request.what,
                }
                .into());
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                return Err(unauthorized(target, status.as_u16(), request.access).into());
            }
            _ => return Err(status_error(target, &response, request.what)),
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header(CONTENT_TYPE.as_str());
        let digest = header("docker-content-digest");
        let body = if request.head {
            Bytes::new()
        } else {
            read_body(target, response, request.limit).await?
        };
        Ok(Answer {
            body,
            content_type,
            digest,
        })
    }
}

/// A fenced client whose redirects follow the rules for `plain_http` hosts.
fn fenced(
    options: &RegistryOptions,
    plain_http: Vec<String>,
    private: PrivateRegistries,
) -> Result<FencedClient, Error> {
    let allowed = options.allowed.clone();
    Ok(FencedClient::new(ClientSettings {
        connect_timeout: options.connect_timeout,
        extra_ca_pem: &options.extra_ca_pem,
        redirect: Box::new(move |next, previous| {
            auth::check_redirect(next, previous, &plain_http, &allowed)
        }),
        private,
    })?)
}

/// What goes in the Authorization header.
#[derive(Clone)]
enum Authorization {
    Basic(String, String),
    Bearer(String),
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded maps stay consistent even if a holder panicked: every update is one insert.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
