//! The registry authentication handshake's decisions: reading `WWW-Authenticate` challenges,
//! whether a token realm or a redirect may be followed, the token request's scope, and the token
//! response; and the bearer tokens a client keeps between requests ([`Tokens`], bounded). Pure:
//! no I/O, no clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use http_auth::ChallengeParser;
use reqwest::Url;
use serde::Deserialize;

use super::allow::{AllowList, url_host};
use super::error::Refusal;

/// What a registry asked for in its 401 answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Challenge {
    /// Fetch a token from `realm` (the distribution token flow).
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
    /// Send username and password with every request.
    Basic,
}

/// Reads the first challenge this client can answer (Bearer preferred over Basic).
pub(super) fn parse_challenge(header: &str) -> Option<Challenge> {
    let mut basic = false;
    for challenge in ChallengeParser::new(header).flatten() {
        if challenge.scheme.eq_ignore_ascii_case("bearer") {
            let param = |name: &str| {
                challenge
                    .params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            if let Some(realm) = param("realm") {
                return Some(Challenge::Bearer {
                    realm,
                    service: param("service"),
                    scope: param("scope"),
                });
            }
        } else if challenge.scheme.eq_ignore_ascii_case("basic") {
            basic = true;
        }
    }
    basic.then_some(Challenge::Basic)
}

/// Whether the client may ask `realm` for a token for the registry at `registry_host` (and send
/// it the credentials): HTTPS, or plain HTTP on a plain-HTTP registry's host; and on the
/// registry's own host or an allowed one.
pub(super) fn check_realm(
    realm: &Url,
    registry_host: &str,
    plain_http: &[String],
    allowed: &AllowList,
) -> Result<(), Refusal> {
    let host = url_host(realm).unwrap_or_default();
    if realm.scheme() != "https" && !plain_http.iter().any(|h| h.eq_ignore_ascii_case(&host)) {
        return Err(Refusal::RealmPlainHttp);
    }
    if host.eq_ignore_ascii_case(registry_host) || allowed.allows(&host) {
        Ok(())
    } else {
        Err(Refusal::RealmHost)
    }
}

/// Whether a redirect from `previous` to `next` may be followed: never HTTPS to plain HTTP, plain
/// HTTP only between plain-HTTP registries, and only to the same host or an allowed one. (The
/// HTTP client drops the Authorization header on a change of host.)
pub(super) fn check_redirect(
    next: &Url,
    previous: &Url,
    plain_http: &[String],
    allowed: &AllowList,
) -> Result<(), Refusal> {
    let host = url_host(next).unwrap_or_default();
    let plain_host = plain_http.iter().any(|h| h.eq_ignore_ascii_case(&host));
    if next.scheme() != "https" && (previous.scheme() == "https" || !plain_host) {
        return Err(Refusal::RedirectPlainHttp);
    }
    if url_host(previous).is_some_and(|p| p == host) || allowed.allows(&host) {
        Ok(())
    } else {
        Err(Refusal::RedirectHost)
    }
}

/// The scope to ask a token for: pull access to the repository (what the challenge named, when
/// it named a scope, since some registries want exactly that).
pub(super) fn token_scope(repository: &str, challenged: Option<&str>) -> String {
    challenged
        .map(str::to_string)
        .unwrap_or_else(|| format!("repository:{repository}:pull"))
}

/// The client id ocifit names itself with in OAuth2 token requests (the spec requires one).
pub(super) const OAUTH_CLIENT_ID: &str = "ocifit";

/// The form of an OAuth2 token request exchanging a refresh token (docker's `identitytoken`) for
/// an access token, as the distribution spec's OAuth2 flow has it: `POST` to the realm.
pub(super) fn refresh_token_form<'a>(
    service: Option<&'a str>,
    scope: &'a str,
    refresh_token: &'a str,
) -> Vec<(&'static str, &'a str)> {
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("client_id", OAUTH_CLIENT_ID),
        ("refresh_token", refresh_token),
        ("scope", scope),
    ];
    if let Some(service) = service {
        form.push(("service", service));
    }
    form
}

/// A bearer token and how long it may be used.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Token {
    pub value: String,
    pub lifetime: Duration,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<redacted>")
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

/// The distribution spec's default token lifetime when the server names none.
const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);
/// The longest a token is reused, whatever the server says: a huge `expires_in` must neither
/// overflow the clock nor keep a token for ever.
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// Reads a token endpoint's answer (`token` or the OAuth2 `access_token`). The lifetime is cut
/// by a tenth so a token is renewed before the registry rejects it.
pub(super) fn parse_token_response(body: &[u8]) -> Option<Token> {
    #[derive(Deserialize)]
    struct Response {
        #[serde(default)]
        token: Option<String>,
        #[serde(default)]
        access_token: Option<String>,
        #[serde(default)]
        expires_in: Option<u64>,
    }
    let parsed: Response = serde_json::from_slice(body).ok()?;
    let value = parsed
        .token
        .filter(|t| !t.is_empty())
        .or(parsed.access_token.filter(|t| !t.is_empty()))?;
    let lifetime = parsed
        .expires_in
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TOKEN_LIFETIME)
        .min(MAX_TOKEN_LIFETIME);
    Some(Token {
        value,
        lifetime: lifetime - lifetime / 10,
    })
}

/// Bearer tokens kept per client; expired ones go first.
const MAX_TOKENS: usize = 1024;

/// Bearer tokens by (host, repository) with their expiry. Expired tokens are dropped whenever a
/// new one comes, and at most [`MAX_TOKENS`] are kept (the soonest to expire goes first).
#[derive(Default)]
pub(super) struct Tokens(pub(super) HashMap<(String, String), (String, Instant)>);

impl Tokens {
    pub(super) fn get(&self, host: &str, repository: &str, now: Instant) -> Option<String> {
        let (token, expiry) = self.0.get(&(host.to_string(), repository.to_string()))?;
        (now < *expiry).then(|| token.clone())
    }

    pub(super) fn insert(
        &mut self,
        key: (String, String),
        token: String,
        expiry: Instant,
        now: Instant,
    ) {
        self.0.retain(|_, (_, expires)| *expires > now);
        if self.0.len() >= MAX_TOKENS && !self.0.contains_key(&key) {
            let soonest = self
                .0
                .iter()
                .min_by_key(|(_, (_, expires))| *expires)
                .map(|(k, _)| k.clone());
            if let Some(soonest) = soonest {
                self.0.remove(&soonest);
            }
        }
        self.0.insert(key, (token, expiry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_style_bearer_challenge_is_read() {
        let header = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/ubuntu:pull""#;
        assert_eq!(
            parse_challenge(header),
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:library/ubuntu:pull".into()),
            })
        );
    }

    #[test]
    fn basic_challenge_is_read() {
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
    }

    #[test]
    fn bearer_is_preferred_when_both_are_offered() {
        let header = r#"Basic realm="x", Bearer realm="https://t.example/token""#;
        assert!(matches!(
            parse_challenge(header),
            Some(Challenge::Bearer { .. })
        ));
    }

    #[test]
    fn bearer_without_realm_and_unknown_schemes_are_unanswerable() {
        assert_eq!(parse_challenge(r#"Bearer service="x""#), None);
        assert_eq!(parse_challenge(r#"Negotiate abc"#), None);
        assert_eq!(parse_challenge(""), None);
    }

    #[test]
    fn token_scope_defaults_to_pull_on_the_repository() {
        assert_eq!(token_scope("acme/app", None), "repository:acme/app:pull");
        assert_eq!(
            token_scope("acme/app", Some("repository:acme/app:pull,push")),
            "repository:acme/app:pull,push"
        );
    }

    #[test]
    fn an_identity_token_is_sent_as_the_refresh_token_grant_with_service_and_scope() {
        let form = refresh_token_form(Some("registry.example.com"), "repository:a:pull", "rt");
        assert_eq!(
            form,
            vec![
                ("grant_type", "refresh_token"),
                ("client_id", "ocifit"),
                ("refresh_token", "rt"),
                ("scope", "repository:a:pull"),
                ("service", "registry.example.com"),
            ]
        );
        assert!(
            !refresh_token_form(None, "s", "rt")
                .iter()
                .any(|(k, _)| *k == "service")
        );
    }

    #[test]
    fn token_response_reads_token_or_access_token_with_lifetime() {
        let t = parse_token_response(br#"{"token":"abc","expires_in":300}"#).unwrap();
        assert_eq!(
            (t.value.as_str(), t.lifetime),
            ("abc", Duration::from_secs(270))
        );
        let t = parse_token_response(br#"{"access_token":"xyz"}"#).unwrap();
        assert_eq!(
            (t.value.as_str(), t.lifetime),
            ("xyz", Duration::from_secs(54))
        );
        assert_eq!(parse_token_response(br#"{"token":""}"#), None);
        assert_eq!(parse_token_response(b"denied"), None);
    }

    #[test]
    fn a_huge_expires_in_is_capped_so_no_expiry_overflows_the_clock() {
        let body = format!(r#"{{"token":"t","expires_in":{}}}"#, u64::MAX);
        let t = parse_token_response(body.as_bytes()).unwrap();
        assert_eq!(t.lifetime, Duration::from_secs(3240));
        assert!(std::time::Instant::now().checked_add(t.lifetime).is_some());
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn allow(patterns: &[&str]) -> AllowList {
        AllowList::parse(patterns).unwrap()
    }

    #[test]
    fn a_realm_must_be_https_unless_its_host_is_a_plain_http_registry() {
        let any = allow(&[]);
        let plain = ["127.0.0.1:5000".to_string()];
        let ok =
            |realm: &str, plain: &[String]| check_realm(&url(realm), "127.0.0.1:5000", plain, &any);
        assert_eq!(ok("https://auth.example.com/token", &[]), Ok(()));
        assert_eq!(ok("http://127.0.0.1:5000/token", &plain), Ok(()));
        assert_eq!(
            ok("http://127.0.0.1:5000/token", &[]),
            Err(Refusal::RealmPlainHttp)
        );
        assert_eq!(
            ok("http://127.0.0.1:6000/token", &plain),
            Err(Refusal::RealmPlainHttp)
        );
        assert_eq!(
            ok("http://auth.example.com/token", &plain),
            Err(Refusal::RealmPlainHttp)
        );
    }

    #[test]
    fn a_realm_on_another_host_must_be_allowed_when_there_is_a_list() {
        let listed = allow(&["r.example.com", "auth.example.com"]);
        let check = |realm: &str, allowed: &AllowList| {
            check_realm(&url(realm), "r.example.com", &[], allowed)
        };
        assert_eq!(
            check("https://r.example.com/token", &allow(&["other.example"])),
            Ok(())
        );
        assert_eq!(check("https://auth.example.com/token", &listed), Ok(()));
        assert_eq!(
            check("https://evil.example/token", &listed),
            Err(Refusal::RealmHost)
        );
        assert_eq!(check("https://evil.example/token", &allow(&[])), Ok(()));
    }

    #[test]
    fn a_redirect_never_downgrades_to_http_nor_leaves_the_list() {
        let listed = allow(&["r.example.com", "*.cdn.example"]);
        let plain = ["127.0.0.1:5000".to_string(), "127.0.0.1:5001".to_string()];
        let check = |next: &str, previous: &str| {
            check_redirect(&url(next), &url(previous), &plain, &listed)
        };
        assert_eq!(
            check("https://blobs.cdn.example/x", "https://r.example.com/v2/"),
            Ok(())
        );
        assert_eq!(
            check("https://r.example.com/other", "https://r.example.com/v2/"),
            Ok(())
        );
        assert_eq!(
            check("https://evil.example/x", "https://r.example.com/v2/"),
            Err(Refusal::RedirectHost)
        );
        assert_eq!(
            check("http://blobs.cdn.example/x", "https://r.example.com/v2/"),
            Err(Refusal::RedirectPlainHttp)
        );
        assert_eq!(
            check("http://127.0.0.1:5000/x", "https://r.example.com/v2/"),
            Err(Refusal::RedirectPlainHttp)
        );
        let any = allow(&[]);
        let check_any =
            |next: &str, previous: &str| check_redirect(&url(next), &url(previous), &plain, &any);
        assert_eq!(
            check_any("http://127.0.0.1:5000/b", "http://127.0.0.1:5000/a"),
            Ok(())
        );
        assert_eq!(
            check_any("http://127.0.0.1:5001/b", "http://127.0.0.1:5000/a"),
            Ok(())
        );
        assert_eq!(
            check_any("http://127.0.0.1:6000/b", "http://127.0.0.1:5000/a"),
            Err(Refusal::RedirectPlainHttp)
        );
        assert_eq!(
            check_any("https://anywhere.example/b", "http://127.0.0.1:5000/a"),
            Ok(())
        );
    }

    #[test]
    fn token_debug_hides_the_value() {
        let t = parse_token_response(br#"{"token":"very-secret"}"#).unwrap();
        assert!(!format!("{t:?}").contains("very-secret"));
    }

    /// The tests of what was `tokens.rs`.
    mod tokens {
        use super::*;
        use std::time::Duration;

        fn key(n: usize) -> (String, String) {
            ("r.example.com".into(), format!("repo{n}"))
        }

        #[test]
        fn expired_tokens_are_dropped_and_at_most_the_bound_is_kept() {
            let now = Instant::now();
            let mut tokens = Tokens::default();
            tokens.insert(key(0), "old".into(), now, now);
            let later = now + Duration::from_secs(1);
            for n in 1..=MAX_TOKENS + 10 {
                let expiry = later + Duration::from_secs(n as u64);
                tokens.insert(key(n), format!("t{n}"), expiry, later);
            }
            assert_eq!(tokens.0.len(), MAX_TOKENS);
            assert!(!tokens.0.contains_key(&key(0)), "the expired token is gone");
            assert!(
                !tokens.0.contains_key(&key(1)),
                "the soonest to expire went first"
            );
            let newest = MAX_TOKENS + 10;
            assert_eq!(
                tokens.get("r.example.com", &format!("repo{newest}"), later),
                Some(format!("t{newest}"))
            );
        }
    }
}
