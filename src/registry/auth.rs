//! The registry authentication handshake's decisions: reading `WWW-Authenticate` challenges,
//! the token request's scope, and the token response. Pure: no I/O, no clock.

use std::time::Duration;

use http_auth::ChallengeParser;
use serde::Deserialize;

/// What a registry asked for in its 401 answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
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
pub fn parse_challenge(header: &str) -> Option<Challenge> {
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

/// The scope to ask a token for: pull access to the repository (what the challenge named, when
/// it named a scope, since some registries want exactly that).
pub fn token_scope(repository: &str, challenged: Option<&str>) -> String {
    challenged
        .map(str::to_string)
        .unwrap_or_else(|| format!("repository:{repository}:pull"))
}

/// A bearer token and how long it may be used.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
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

/// Reads a token endpoint's answer (`token` or the OAuth2 `access_token`). The lifetime is cut
/// by a tenth so a token is renewed before the registry rejects it.
pub fn parse_token_response(body: &[u8]) -> Option<Token> {
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
        .unwrap_or(DEFAULT_TOKEN_LIFETIME);
    Some(Token {
        value,
        lifetime: lifetime - lifetime / 10,
    })
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
    fn token_debug_hides_the_value() {
        let t = parse_token_response(br#"{"token":"very-secret"}"#).unwrap();
        assert!(!format!("{t:?}").contains("very-secret"));
    }
}
