//! Registry credentials of a step's helper, from the oras-operator's environment contract:
//! `ORAS_USER` with `ORAS_PULL_PASS` for pulls and `ORAS_PUSH_PASS` for pushes (the keys of the
//! Secret named by the `oras-env` annotation). They go into a docker config for the one registry
//! of the transfer and nowhere else; nothing logs them.

use crate::registry::{ConfigError, DockerConfig};

/// The user name, for both directions.
pub const USER: &str = "ORAS_USER";
/// The password for pulls.
pub const PULL_PASS: &str = "ORAS_PULL_PASS";
/// The password for pushes.
pub const PUSH_PASS: &str = "ORAS_PUSH_PASS";

/// Which password a transfer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Pull,
    Push,
}

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

/// [`docker_config`] from this process's environment.
pub fn from_environment(
    registries: &[&str],
    direction: Direction,
) -> Result<DockerConfig, ConfigError> {
    let user = std::env::var(USER).ok();
    let password = std::env::var(direction.password_variable()).ok();
    docker_config(registries, user.as_deref(), password.as_deref())
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
    fn each_direction_reads_its_own_password() {
        assert_eq!(Direction::Pull.password_variable(), "ORAS_PULL_PASS");
        assert_eq!(Direction::Push.password_variable(), "ORAS_PUSH_PASS");
    }
}
