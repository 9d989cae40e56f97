//! Registry credentials of a step's helper, from the oras-operator's environment contract:
//! `ORAS_USER` with `ORAS_PULL_PASS` for pulls and `ORAS_PUSH_PASS` for pushes (the keys of the
//! Secret named by the `oras-env` annotation). They go into a docker config for the one registry
//! of the transfer and nowhere else; nothing logs them.

use super::report::Direction;
use crate::registry::{ConfigError, DockerConfig};

/// The user name, for both directions.
pub const USER: &str = "ORAS_USER";
/// The password for pulls.
pub const PULL_PASS: &str = "ORAS_PULL_PASS";
/// The password for pushes.
pub const PUSH_PASS: &str = "ORAS_PUSH_PASS";
/// The pusher's user when `ORAS_USER` is absent: the webhook sets it from an ArtifactCache's
/// generated Secret's `ORAS_USER`, and `ORAS_USER` from its optional `ORAS_PUSH_USER`, so a Secret
/// from before the pull/push split (one user, no `ORAS_PUSH_USER`) still pushes as its one user.
pub const PRE_SPLIT_USER: &str = "OCIFIT_PRE_SPLIT_USER";

impl Direction {
    /// The environment variable holding this direction's password.
    pub fn password_variable(self) -> &'static str {
        match self {
            Direction::Pull => PULL_PASS,
            Direction::Push => PUSH_PASS,
        }
    }
}

/// Credentials for the `registries` (`host[:port]` each) when both a user and a password are given
/// (and not empty); anonymous access otherwise.
pub fn docker_config(
    registries: &[&str],
    user: Option<&str>,
    password: Option<&str>,
) -> Result<DockerConfig, ConfigError> {
    match (user, password) {
        (Some(user), Some(password)) if !user.is_empty() && !password.is_empty() => {
            let entry = serde_json::json!({"username": user, "password": password});
            let auths: serde_json::Map<String, serde_json::Value> = registries
                .iter()
                .map(|registry| (registry.to_string(), entry.clone()))
                .collect();
            let config = serde_json::json!({ "auths": auths });
            DockerConfig::from_json(config.to_string().as_bytes())
        }
        _ => Ok(DockerConfig::default()),
    }
}

/// The user a transfer logs in as: `ORAS_USER` when given (and not empty); for a push only, else
/// [`PRE_SPLIT_USER`] (a pull's `ORAS_USER` is required wherever it comes from).
pub fn user<'a>(
    direction: Direction,
    user: Option<&'a str>,
    pre_split: Option<&'a str>,
) -> Option<&'a str> {
    match (user, direction) {
        (Some(user), _) if !user.is_empty() => Some(user),
        (_, Direction::Push) => pre_split,
        (_, Direction::Pull) => None,
    }
}

/// [`docker_config`] from this process's environment.
pub fn from_environment(
    registries: &[&str],
    direction: Direction,
) -> Result<DockerConfig, ConfigError> {
    let given = std::env::var(USER).ok();
    let pre_split = std::env::var(PRE_SPLIT_USER).ok();
    let user = user(direction, given.as_deref(), pre_split.as_deref());
    let password = std::env::var(direction.password_variable()).ok();
    docker_config(registries, user, password.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Credentials;

    #[test]
    fn user_and_password_give_basic_credentials_for_that_registry_only() {
        let config = docker_config(&["10.0.0.17:5000"], Some("steps"), Some("s3cret")).unwrap();
        assert_eq!(
            config.lookup("10.0.0.17:5000", "workflow/data"),
            Some(&Credentials::Basic {
                username: "steps".into(),
                password: "s3cret".into()
            })
        );
        assert_eq!(config.lookup("ghcr.io", "workflow/data"), None);
        assert!(!format!("{config:?}").contains("s3cret"));
    }

    #[test]
    fn a_missing_or_empty_half_means_anonymous() {
        for (user, password) in [
            (None, Some("p")),
            (Some("u"), None),
            (Some(""), Some("p")),
            (Some("u"), Some("")),
        ] {
            assert!(
                docker_config(&["r:5000"], user, password)
                    .unwrap()
                    .is_empty(),
                "{user:?} {password:?}"
            );
        }
    }

    #[test]
    fn a_push_without_oras_user_logs_in_as_the_pre_split_user() {
        use Direction::{Pull, Push};
        // A generated Secret with `ORAS_PUSH_USER`: its push user, whatever the fallback holds.
        assert_eq!(
            user(Push, Some("steps-push"), Some("steps-pull")),
            Some("steps-push")
        );
        // One from before the split: the kubelet leaves the optional `ORAS_USER` unset.
        assert_eq!(user(Push, None, Some("steps")), Some("steps"));
        assert_eq!(user(Push, Some(""), Some("steps")), Some("steps"));
        // A step's own `oras-env` Secret gives no fallback.
        assert_eq!(user(Push, Some("wf"), None), Some("wf"));
        assert_eq!(user(Push, None, None), None);
        // Pulls read `ORAS_USER` alone.
        assert_eq!(
            user(Pull, Some("steps-pull"), Some("x")),
            Some("steps-pull")
        );
        assert_eq!(user(Pull, None, Some("steps")), None);
    }

    #[test]
    fn each_direction_reads_its_own_password() {
        assert_eq!(Direction::Pull.password_variable(), "ORAS_PULL_PASS");
        assert_eq!(Direction::Push.password_variable(), "ORAS_PUSH_PASS");
    }
}
