//! Requests other than the buffered reads of `fetch`: any method, headers and body, answered with
//! the response unread, for uploads and streamed downloads. They share the transport's
//! authentication handshake, retries and answer classification; a streamed body is sent once,
//! with the authorization an earlier request on the same repository established. The rules of
//! `fetch` hold here too: a registry outside the allow-list is refused before anything is sent,
//! an absolute location the registry gives (an upload's `Location`) is held to the redirect rules,
//! and every exchange takes one of the root's request permits.

use reqwest::header::HeaderMap;
use reqwest::{Body, Method, Response, StatusCode, Url};

use super::{AttemptError, Authorization, Request, Transport, retry, status_error, unauthorized};
use crate::registry::allow::url_host;
use crate::registry::auth;
use crate::registry::error::{Access, ContentProblem, Error, Refusal, Target};
use crate::registry::mirrors::Need;
use crate::registry::retry::Decision;

/// One request: where, how, and what its body is (replayable bytes; a stream goes separately).
pub(crate) struct Exchange<'a> {
    pub target: &'a Target,
    /// Host (with port) serving the registry API.
    pub host: &'a str,
    pub method: Method,
    /// A path below the host (`/v2/…`), or an absolute URL the registry gave (an upload's
    /// `Location`).
    pub location: &'a str,
    pub headers: HeaderMap,
    pub body: Option<bytes::Bytes>,
    /// What a 404 means ("blob", "upload", …).
    pub what: &'static str,
    /// What a 401 or 403 refused: the operation this exchange is part of (a push's HEAD of a
    /// blob is refused as a push).
    pub access: Access,
    /// Whether the request timeout covers the whole exchange; false when the content's size sets
    /// how long reading the answer takes (the reader bounds the time between chunks instead).
    pub bounded: bool,
}

impl Transport {
    /// Sends an exchange with authorization (handshake on a 401) and retries of transient
    /// failures; a success (2xx) comes back unread, any other answer as an error.
    pub(crate) async fn exchange(&self, exchange: &Exchange<'_>) -> Result<Response, Error> {
        let mut attempt = 1;
        loop {
            match self.exchange_once(exchange).await {
                Ok(response) => return Ok(response),
                Err(AttemptError {
                    error,
                    failure: Some(failure),
                }) => match retry::decide(&self.link.retry, attempt, failure) {
                    Decision::RetryIn(delay) => {
                        tracing::debug!(target = %exchange.target, attempt, ?delay, %error, "retrying registry request");
                        tokio::time::sleep(delay).await;
                    }
                    Decision::GiveUp => return Err(error),
                },
                Err(AttemptError { error, .. }) => return Err(error),
            }
            attempt += 1;
        }
    }

    /// Sends a streamed body once, without a request timeout (its length is the data's), with
    /// the authorization already established for the target's repository.
    pub(crate) async fn stream(
        &self,
        exchange: &Exchange<'_>,
        body: Body,
    ) -> Result<Response, Error> {
        let url = self.url(exchange)?;
        // Held for the whole upload: a streamed body is a request in flight.
        let _permit = self.link.permits.acquire().await.ok();
        let authorization = self.authorization_for(exchange, &url);
        let builder = self
            .link
            .http
            .request(exchange.method.clone(), url)
            .headers(exchange.headers.clone())
            .body(body);
        let response = self
            .send_builder(
                exchange.target,
                &self.link.http,
                apply(builder, authorization.as_ref()),
            )
            .await
            .map_err(|err| err.error)?;
        match refusal(exchange, &response) {
            None => Ok(response),
            Some(err) => Err(err.error),
        }
    }

    /// The longest wait for the next chunk of an unbounded answer: the request timeout.
    pub(crate) fn idle_timeout(&self) -> std::time::Duration {
        self.link.request_timeout
    }

    async fn exchange_once(&self, exchange: &Exchange<'_>) -> Result<Response, AttemptError> {
        let url = self.url(exchange)?;
        // As in `fetch`: held for the attempt, never while waiting for another permit.
        let _permit = self.link.permits.acquire().await.ok();
        let mut authorization = self.authorization_for(exchange, &url);
        let mut response = self
            .send_exchange(exchange, &url, authorization.as_ref())
            .await?;
        if response.status() == StatusCode::UNAUTHORIZED && same_host(&url, exchange.host) {
            let credentials = self
                .credentials
                .lookup(&exchange.target.registry, &exchange.target.repository);
            let request = Request {
                target: exchange.target,
                host: exchange.host,
                path: String::new(),
                accept: &[],
                head: false,
                limit: 0,
                what: exchange.what,
                access: exchange.access,
                need: Need::Pull,
            };
            let via = self.direct(exchange.host, &exchange.target.registry);
            authorization = Some(
                self.answer_challenge(&request, &via, &response, credentials)
                    .await?,
            );
            response = self
                .send_exchange(exchange, &url, authorization.as_ref())
                .await?;
        }
        match refusal(exchange, &response) {
            None => Ok(response),
            Some(err) => Err(err),
        }
    }

    async fn send_exchange(
        &self,
        exchange: &Exchange<'_>,
        url: &Url,
        authorization: Option<&Authorization>,
    ) -> Result<Response, AttemptError> {
        let mut builder = self
            .link
            .http
            .request(exchange.method.clone(), url.clone())
            .headers(exchange.headers.clone());
        if exchange.bounded {
            builder = builder.timeout(self.link.request_timeout);
        }
        if let Some(body) = &exchange.body {
            builder = builder.body(body.clone());
        }
        self.send_builder(
            exchange.target,
            &self.link.http,
            apply(builder, authorization),
        )
        .await
    }

    /// The URL of an exchange: a path joined to the registry's scheme and host, or the absolute
    /// URL the registry gave, which must pass the redirect rules as if the registry had
    /// redirected there. A registry the allow-list refuses gets no URL at all.
    fn url(&self, exchange: &Exchange<'_>) -> Result<Url, Error> {
        let not_allowed = |host: String, why: Refusal| Error::NotAllowed {
            target: exchange.target.clone(),
            host,
            why,
        };
        if !self.link.allowed.allows(&exchange.target.registry) {
            return Err(not_allowed(
                exchange.target.registry.clone(),
                Refusal::Registry,
            ));
        }
        let scheme = if self.link.plain_http.iter().any(|h| h == exchange.host) {
            "http"
        } else {
            "https"
        };
        let unusable = |err: &dyn std::fmt::Display| {
            Error::content(
                exchange.target,
                ContentProblem::Protocol(format!(
                    "the registry gave an unusable {} location: {err}",
                    exchange.what
                )),
            )
        };
        let origin = format!("{scheme}://{}", exchange.host);
        // Joined as text, never `Url::join`: a path like `//elsewhere/…` stays on this host.
        if exchange.location.starts_with('/') {
            return Url::parse(&format!("{origin}{}", exchange.location)).map_err(|e| unusable(&e));
        }
        let base = Url::parse(&origin).map_err(|e| unusable(&e))?;
        let url = Url::parse(exchange.location).map_err(|e| unusable(&e))?;
        auth::check_redirect(&url, &base, &self.link.plain_http, &self.link.allowed)
            .map_err(|why| not_allowed(url_host(&url).unwrap_or_default(), why))?;
        Ok(url)
    }

    /// What authorization to send before being challenged; none to any host but the registry's
    /// own, so an absolute location elsewhere never receives its credentials.
    fn authorization_for(&self, exchange: &Exchange<'_>, url: &Url) -> Option<Authorization> {
        if !same_host(url, exchange.host) {
            return None;
        }
        let credentials = self
            .credentials
            .lookup(&exchange.target.registry, &exchange.target.repository);
        self.known_authorization(exchange.host, &exchange.target.repository, credentials)
    }
}

/// Whether a URL points at the registry's own `host[:port]`.
fn same_host(url: &Url, host: &str) -> bool {
    let authority = match (url.host_str(), url.port()) {
        (Some(name), Some(port)) => format!("{name}:{port}"),
        (Some(name), None) => name.to_string(),
        (None, _) => return false,
    };
    authority == host
}

fn apply(
    builder: reqwest::RequestBuilder,
    authorization: Option<&Authorization>,
) -> reqwest::RequestBuilder {
    match authorization {
        Some(Authorization::Basic(username, password)) => {
            builder.basic_auth(username, Some(password))
        }
        Some(Authorization::Bearer(token)) => builder.bearer_auth(token),
        None => builder,
    }
}

/// Why an answer is no success: 404, 401/403 and other statuses become the transport's errors
/// (the last ones retryable when transient); `None` for a success (2xx).
fn refusal(exchange: &Exchange<'_>, response: &Response) -> Option<AttemptError> {
    let status = response.status();
    if status.is_success() {
        return None;
    }
    Some(match status {
        StatusCode::NOT_FOUND => Error::NotFound {
            target: exchange.target.clone(),
            what: exchange.what,
        }
        .into(),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            unauthorized(exchange.target, status.as_u16(), exchange.access).into()
        }
        _ => status_error(exchange.target, response, exchange.what),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_registrys_own_authority_is_the_same_host() {
        let url = |u: &str| Url::parse(u).unwrap();
        assert!(same_host(
            &url("http://127.0.0.1:5000/v2/x"),
            "127.0.0.1:5000"
        ));
        assert!(same_host(&url("https://ghcr.io/v2/x"), "ghcr.io"));
        assert!(!same_host(
            &url("http://127.0.0.1:5001/v2/x"),
            "127.0.0.1:5000"
        ));
        assert!(!same_host(&url("https://s3.example.com/u"), "ghcr.io"));
        assert!(!same_host(&url("https://ghcr.io:8443/v2/x"), "ghcr.io"));
    }
}
