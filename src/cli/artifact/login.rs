//! How `ocifit artifact pull|push` logs in, as `oras` does: `--username` with
//! `--password-stdin`, else the step contract's `ORAS_USER` with `ORAS_PULL_PASS` /
//! `ORAS_PUSH_PASS`, else the docker config `oras login` and `docker login` write
//! (`--registry-config`, else `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`): its
//! credential helpers (`credHelpers`, `credsStore`) first, then its `auths`. `--ca-file` trusts a
//! private CA. Running a helper and reading files is all this adapter does; the choices are pure.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use clap::Args;
use tokio::io::AsyncWriteExt;

use crate::registry::{
    self, ConfigError, CredentialHelpers, Credentials, DockerConfig, HelperAnswer, HelperError,
    Reference, Registry,
};
use crate::step_helper::{self, Direction};

/// How long a credential helper may take (a keychain may prompt; a hung one must not hang us).
const HELPER_TIMEOUT: Duration = Duration::from_secs(60);

/// The login flags of `pull` and `push`, spelled as `oras` spells them.
#[derive(Debug, Clone, Default, Args)]
pub struct Login {
    /// Registry user name; the password is read from stdin (`--password-stdin`). Wins over
    /// `ORAS_USER` and the docker config.
    #[arg(long, short = 'u', requires = "password_stdin")]
    pub username: Option<String>,
    /// Read the registry password (or token) from stdin, with `--username`.
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
    /// The docker config to read credentials from (default `$DOCKER_CONFIG/config.json`, else
    /// `~/.docker/config.json`).
    #[arg(long, value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// PEM certificates to trust besides the system's, for a registry with a private CA.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

/// Why `pull` or `push` cannot log in.
#[derive(Debug, thiserror::Error)]
pub(super) enum LoginError {
    #[error(transparent)]
    Registry(#[from] registry::Error),
    #[error("failed to read the password from stdin")]
    Stdin(#[source] std::io::Error),
    #[error("{path}")]
    Config {
        path: String,
        #[source]
        source: ConfigError,
    },
    #[error("failed to run the credential helper {program} for {registry}: {message}")]
    HelperNotRun {
        program: String,
        registry: String,
        message: String,
    },
    #[error("the credential helper {program} gave no credentials for {registry}")]
    Helper {
        program: String,
        registry: String,
        #[source]
        source: HelperError,
    },
}

/// Credentials a caller gave explicitly, in precedence order: flags, then the environment.
#[derive(Debug, Default)]
pub(super) struct Given {
    pub flags: Option<Credentials>,
    pub environment: DockerConfig,
}

/// A client for the references' registries with credentials as `oras` finds them.
pub(super) async fn client(
    references: &[&Reference],
    plain_http: bool,
    direction: Direction,
    login: &Login,
) -> Result<Registry, LoginError> {
    let mut options = step_helper::options(references, plain_http);
    let hosts = step_helper::hosts(references);
    let given = Given {
        flags: flags(login)?,
        environment: step_helper::from_environment(&hosts, direction)
            .map_err(registry::Error::from)?,
    };
    let (file, helpers) = read_docker_config(login.registry_config.as_deref())?;
    let mut credentials = file;
    for host in hosts.iter().rev() {
        let chosen = match chosen(&given, host) {
            Some(chosen) => Some(chosen),
            None => match helpers.helper_for(host) {
                Some(helper) => run_helper(helper, host).await?,
                None => None,
            },
        };
        if let Some(chosen) = chosen {
            credentials = credentials.with_first(host, chosen);
        }
    }
    options.credentials = credentials;
    if let Some(path) = &login.ca_file {
        options.extra_ca_pem.push(registry::read_ca_file(path)?);
    }
    Ok(Registry::new(options)?)
}

/// What was given for `host`: the flags, else the environment; `None` leaves it to the docker
/// config (its helper, else its `auths`).
pub(super) fn chosen(given: &Given, host: &str) -> Option<Credentials> {
    given
        .flags
        .clone()
        .or_else(|| given.environment.lookup(host, "").cloned())
}

fn flags(login: &Login) -> Result<Option<Credentials>, LoginError> {
    let Some(username) = &login.username else {
        return Ok(None);
    };
    let mut password = String::new();
    std::io::stdin()
        .read_to_string(&mut password)
        .map_err(LoginError::Stdin)?;
    Ok(Some(Credentials::Basic {
        username: username.clone(),
        password: password.trim_end_matches(['\r', '\n']).to_string(),
    }))
}

/// Where the docker config is: the flag, `$DOCKER_CONFIG/config.json`, `~/.docker/config.json`.
pub(super) fn config_path(
    flag: Option<&Path>,
    docker_config: Option<&str>,
    home: Option<&str>,
) -> Option<PathBuf> {
    match (flag, docker_config, home) {
        (Some(path), _, _) => Some(path.to_path_buf()),
        (None, Some(dir), _) if !dir.is_empty() => Some(Path::new(dir).join("config.json")),
        (None, _, Some(home)) if !home.is_empty() => {
            Some(Path::new(home).join(".docker").join("config.json"))
        }
        _ => None,
    }
}

/// The docker config's `auths` and helpers; none when no file is there (unless the flag named
/// one: a file asked for must exist).
fn read_docker_config(
    flag: Option<&Path>,
) -> Result<(DockerConfig, CredentialHelpers), LoginError> {
    let docker_config = std::env::var("DOCKER_CONFIG").ok();
    let home = std::env::var("HOME").ok();
    let Some(path) = config_path(flag, docker_config.as_deref(), home.as_deref()) else {
        return Ok(Default::default());
    };
    let shown = path.display().to_string();
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        // As docker: a default config that is missing or unreadable (another user's HOME) is
        // no credentials, with a warning when it is there but unreadable.
        Err(err) if flag.is_none() => {
            if err.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %shown, %err, "docker config unreadable, not used");
            }
            return Ok(Default::default());
        }
        Err(err) => {
            return Err(LoginError::Config {
                path: shown.clone(),
                source: ConfigError::ReadFile {
                    path: shown,
                    message: err.to_string(),
                },
            });
        }
    };
    let config = |source| LoginError::Config {
        path: shown.clone(),
        source,
    };
    let auths = DockerConfig::from_json(&bytes).map_err(config)?;
    let helpers = CredentialHelpers::from_json(&bytes).map_err(config)?;
    Ok((auths, helpers))
}

/// Runs `docker-credential-<helper> get` with the registry's server address on stdin.
async fn run_helper(helper: &str, host: &str) -> Result<Option<Credentials>, LoginError> {
    let program = registry::helper_program(helper);
    let not_run = |message: String| LoginError::HelperNotRun {
        program: program.clone(),
        registry: host.to_string(),
        message,
    };
    let mut child = tokio::process::Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| not_run(err.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(registry::server_address(host).as_bytes())
            .await
            .map_err(|err| not_run(err.to_string()))?;
    }
    let output = tokio::time::timeout(HELPER_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| not_run(format!("no answer within {}s", HELPER_TIMEOUT.as_secs())))?
        .map_err(|err| not_run(err.to_string()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let message = if stderr.trim().is_empty() {
        String::from_utf8_lossy(&output.stdout).into_owned()
    } else {
        stderr.into_owned()
    };
    match registry::read_answer(output.status.success(), &output.stdout, &message) {
        Ok(HelperAnswer::Found(credentials)) => Ok(Some(credentials)),
        Ok(HelperAnswer::NotFound) => Ok(None),
        Err(source) => Err(LoginError::Helper {
            program,
            registry: host.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str) -> Credentials {
        Credentials::Basic {
            username: user.into(),
            password: "pw".into(),
        }
    }

    #[test]
    fn flags_win_over_the_environment_which_wins_over_the_docker_config() {
        let environment = DockerConfig::for_registry("r:5000", basic("env"));
        let both = Given {
            flags: Some(basic("flag")),
            environment: environment.clone(),
        };
        assert_eq!(chosen(&both, "r:5000"), Some(basic("flag")));
        let env_only = Given {
            flags: None,
            environment,
        };
        assert_eq!(chosen(&env_only, "r:5000"), Some(basic("env")));
        assert_eq!(chosen(&Given::default(), "r:5000"), None);
        // What was chosen goes ahead of the config's own entry for that registry.
        let file = DockerConfig::for_registry("r:5000", basic("file"));
        let merged = file.with_first("r:5000", basic("env"));
        assert_eq!(merged.lookup("r:5000", "a/b"), Some(&basic("env")));
    }

    #[test]
    fn the_docker_config_is_found_where_docker_and_oras_look() {
        let flag = Path::new("/etc/ci/config.json");
        assert_eq!(
            config_path(Some(flag), Some("/d"), Some("/home/u")),
            Some(flag.to_path_buf())
        );
        assert_eq!(
            config_path(None, Some("/d"), Some("/home/u")),
            Some(PathBuf::from("/d/config.json"))
        );
        assert_eq!(
            config_path(None, Some(""), Some("/home/u")),
            Some(PathBuf::from("/home/u/.docker/config.json"))
        );
        assert_eq!(config_path(None, None, None), None);
    }
}
