//! Docker credential helpers as a docker config names them (`credHelpers` per registry, else
//! `credsStore`), and what a helper's `get` answers. Pure: running the helper is the caller's
//! (only the command line runs one; a Kubernetes Secret has no helper binary beside it).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::docker_config::Credentials;
use super::error::ConfigError;

/// The user name a helper answers with when its secret is an identity token, as docker reads it.
const TOKEN_USERNAME: &str = "<token>";
/// What docker's helpers print when they hold nothing for the server (and exit 1).
const NOT_FOUND: &str = "credentials not found in native keychain";

/// The helpers a docker config names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialHelpers {
    store: Option<String>,
    per_registry: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct HelperFields {
    #[serde(default, rename = "credsStore")]
    store: Option<String>,
    #[serde(default, rename = "credHelpers")]
    per_registry: BTreeMap<String, String>,
}

impl CredentialHelpers {
    /// Reads `credsStore` and `credHelpers` from a docker config.json. A helper's name becomes
    /// part of a program's name, so it may hold only letters, digits, `.`, `_` and `-`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ConfigError> {
        let fields: HelperFields = serde_json::from_slice(bytes).map_err(|err| {
            ConfigError::DockerConfig(format!("credsStore or credHelpers unreadable: {err}"))
        })?;
        let store = fields.store.filter(|name| !name.is_empty());
        for name in store.iter().chain(fields.per_registry.values()) {
            if !is_helper_name(name) {
                return Err(ConfigError::DockerConfig(format!(
                    "{name:?} is not a credential helper's name (letters, digits, '.', '_', '-')"
                )));
            }
        }
        Ok(CredentialHelpers {
            store,
            per_registry: fields.per_registry,
        })
    }

    /// The helper for `registry` (`host[:port]`, as in references): its own in `credHelpers`,
    /// else the `credsStore`, as docker chooses.
    pub fn helper_for(&self, registry: &str) -> Option<&str> {
        let docker_hub = is_docker_hub(registry).then_some(DOCKER_HUB_SERVER);
        self.per_registry
            .get(registry)
            .or_else(|| docker_hub.and_then(|hub| self.per_registry.get(hub)))
            .or(self.store.as_ref())
            .map(String::as_str)
    }
}

/// The server address docker stores Docker Hub's credentials under.
const DOCKER_HUB_SERVER: &str = "https://index.docker.io/v1/";

fn is_docker_hub(registry: &str) -> bool {
    matches!(
        registry,
        "docker.io" | "index.docker.io" | "registry-1.docker.io"
    )
}

fn is_helper_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The program that serves `helper`, run as `<program> get`.
pub fn helper_program(helper: &str) -> String {
    format!("docker-credential-{helper}")
}

/// What a helper's `get` is asked for on stdin: the registry's host, Docker Hub under the address
/// docker stores it with.
pub fn server_address(registry: &str) -> &str {
    if is_docker_hub(registry) {
        DOCKER_HUB_SERVER
    } else {
        registry
    }
}

/// What a helper's `get` answered.
#[derive(Debug, PartialEq, Eq)]
pub enum HelperAnswer {
    /// Credentials for the server.
    Found(Credentials),
    /// The helper holds none for it: the registry is reached anonymously.
    NotFound,
}

/// Why a helper's answer cannot be used; never holds the answer itself (it may hold a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelperError {
    #[error("it failed: {0}")]
    Failed(String),
    #[error("its answer is not the JSON of a credential helper (ServerURL, Username, Secret)")]
    Unreadable,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// Reads a helper's `get`: its exit success and its stdout; `message` is what it printed when it
/// failed (stderr, else stdout), shown in the error. A user `<token>` makes the secret an identity
/// token, as docker reads it; an empty secret is no credentials.
pub fn read_answer(
    succeeded: bool,
    stdout: &[u8],
    message: &str,
) -> Result<HelperAnswer, HelperError> {
    let text = String::from_utf8_lossy(stdout);
    if !succeeded {
        if text.contains(NOT_FOUND) || message.contains(NOT_FOUND) {
            return Ok(HelperAnswer::NotFound);
        }
        let shown: String = message.trim().chars().take(300).collect();
        return Err(HelperError::Failed(if shown.is_empty() {
            "it printed nothing".into()
        } else {
            shown
        }));
    }
    let answer: Answer = serde_json::from_slice(stdout).map_err(|_| HelperError::Unreadable)?;
    Ok(match (answer.username.as_str(), answer.secret) {
        (_, secret) if secret.is_empty() => HelperAnswer::NotFound,
        (TOKEN_USERNAME, secret) => HelperAnswer::Found(Credentials::IdentityToken(secret)),
        (username, secret) => HelperAnswer::Found(Credentials::Basic {
            username: username.to_string(),
            password: secret,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_s_own_helper_wins_over_the_store() {
        let helpers = CredentialHelpers::from_json(
            br#"{"credsStore":"desktop","credHelpers":{"gcr.io":"gcloud","https://index.docker.io/v1/":"hub"}}"#,
        )
        .unwrap();
        assert_eq!(helpers.helper_for("gcr.io"), Some("gcloud"));
        assert_eq!(helpers.helper_for("ghcr.io"), Some("desktop"));
        assert_eq!(helpers.helper_for("docker.io"), Some("hub"));
        assert_eq!(
            CredentialHelpers::from_json(br#"{"auths":{}}"#)
                .unwrap()
                .helper_for("gcr.io"),
            None
        );
    }

    #[test]
    fn a_helper_name_that_is_not_a_plain_name_is_refused() {
        for json in [
            r#"{"credsStore":"../../bin/sh"}"#,
            r#"{"credHelpers":{"r.example.com":"a b"}}"#,
        ] {
            let err = CredentialHelpers::from_json(json.as_bytes()).unwrap_err();
            assert!(
                err.to_string()
                    .contains("is not a credential helper's name"),
                "{err}"
            );
        }
    }

    #[test]
    fn docker_hub_is_asked_for_under_the_address_docker_stores() {
        assert_eq!(server_address("docker.io"), "https://index.docker.io/v1/");
        assert_eq!(server_address("127.0.0.1:5000"), "127.0.0.1:5000");
        assert_eq!(helper_program("ecr-login"), "docker-credential-ecr-login");
    }

    #[test]
    fn a_helper_s_answer_gives_basic_credentials_or_an_identity_token() {
        assert_eq!(
            read_answer(
                true,
                br#"{"ServerURL":"r","Username":"alice","Secret":"pw"}"#,
                ""
            ),
            Ok(HelperAnswer::Found(Credentials::Basic {
                username: "alice".into(),
                password: "pw".into()
            }))
        );
        assert_eq!(
            read_answer(
                true,
                br#"{"ServerURL":"r","Username":"<token>","Secret":"rt"}"#,
                ""
            ),
            Ok(HelperAnswer::Found(Credentials::IdentityToken("rt".into())))
        );
    }

    #[test]
    fn not_found_is_anonymous_and_any_other_failure_is_an_error_without_the_answer() {
        assert_eq!(
            read_answer(false, b"credentials not found in native keychain\n", ""),
            Ok(HelperAnswer::NotFound)
        );
        assert_eq!(
            read_answer(false, b"", "keychain locked\n"),
            Err(HelperError::Failed("keychain locked".into()))
        );
        assert_eq!(
            read_answer(true, b"Secret=hunter2", ""),
            Err(HelperError::Unreadable)
        );
        assert!(!HelperError::Unreadable.to_string().contains("hunter2"));
    }
}
