//! The credentials ocifit generates for a deployed cache without `htpasswdSecretRef`: one Secret
//! per cache, created once (named by `generateName`, so never an object someone made before, and
//! recorded in the cache's status), holding a pull user and a push user with random passwords,
//! their bcrypt htpasswd (the only kind distribution reads) and the step contract's keys. The
//! prepare init container gets only the pull user's, the push sidecar only the push user's:
//! distribution lets either pull and push, but the pull password, held only while no step code
//! runs, is not the one the sidecar holds, and the registry's log tells them apart. ocifit never
//! reads it back: the kubelet mounts it.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::desired::{self, DesiredError, HTPASSWD_KEY, HTTP_SECRET_KEY};
use crate::api::ArtifactCache;
use crate::step_helper::{PULL_PASS, PUSH_PASS, USER};

/// The user steps pull with.
pub(super) const PULL_USER: &str = "steps-pull";
/// The user steps push with.
pub(super) const PUSH_USER: &str = "steps-push";
/// The Secret's key holding the push user (`ORAS_USER` holds the pull user, as the contract's
/// one user: what reads it for pulls reads what it always did).
pub const PUSH_USER_KEY: &str = "ORAS_PUSH_USER";
/// Random bytes in a password (256 bits).
const PASSWORD_BYTES: usize = 32;
/// bcrypt's lowest cost: distribution checks the password on every request, and a 256-bit random
/// password cannot be guessed whatever the cost, so a higher one only slows every transfer.
const BCRYPT_COST: u32 = 4;

/// Why credentials cannot be generated.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("failed to draw a random password")]
    Random(#[source] getrandom::Error),
    #[error("failed to hash the password for the htpasswd file")]
    Hash(#[source] bcrypt::BcryptError),
}

/// Fresh passwords for the pull and the push user, and the htpasswd of both.
pub struct Generated {
    pull: String,
    push: String,
    htpasswd: String,
    /// The registry's HTTP secret, shared by its replicas (used on object storage).
    http_secret: String,
}

// The password never reaches a log.
impl fmt::Debug for Generated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Generated { .. }")
    }
}

impl Generated {
    /// Two random passwords from the operating system, hashed for the htpasswd file.
    pub fn new() -> Result<Generated, SecretError> {
        Generated::from_passwords(random_password()?, random_password()?, random_password()?)
    }

    /// The pull and the push password, hashed for the htpasswd file, and the HTTP secret.
    pub fn from_passwords(
        pull: String,
        push: String,
        http_secret: String,
    ) -> Result<Generated, SecretError> {
        let hash = |password: &str| bcrypt::hash(password, BCRYPT_COST).map_err(SecretError::Hash);
        Ok(Generated {
            htpasswd: format!(
                "{PULL_USER}:{}\n{PUSH_USER}:{}\n",
                hash(&pull)?,
                hash(&push)?
            ),
            pull,
            push,
            http_secret,
        })
    }
}

fn random_password() -> Result<String, SecretError> {
    let mut bytes = [0u8; PASSWORD_BYTES];
    getrandom::fill(&mut bytes).map_err(SecretError::Random)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The Secret to create for `cache`: a generated name under `<cache>-registry-`, the cache as its
/// controlling owner (deleted with it), the htpasswd and the step credentials.
pub fn secret(cache: &ArtifactCache, generated: &Generated) -> Result<Secret, DesiredError> {
    let owned = desired::owned_meta(cache)?;
    let name = owned.name.clone().unwrap_or_default();
    Ok(Secret {
        metadata: ObjectMeta {
            name: None,
            generate_name: Some(format!("{name}-credentials-")),
            ..owned
        },
        type_: Some("Opaque".into()),
        string_data: Some(BTreeMap::from([
            (HTPASSWD_KEY.to_owned(), generated.htpasswd.clone()),
            (USER.to_owned(), PULL_USER.to_owned()),
            (PULL_PASS.to_owned(), generated.pull.clone()),
            (PUSH_USER_KEY.to_owned(), PUSH_USER.to_owned()),
            (PUSH_PASS.to_owned(), generated.push.clone()),
            (HTTP_SECRET_KEY.to_owned(), generated.http_secret.clone()),
        ])),
        ..Secret::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> ArtifactCache {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "ocifit.io/v1alpha1", "kind": "ArtifactCache",
            "metadata": {"name": "oras", "namespace": "workflow", "uid": "u-1"},
            "spec": {}
        }))
        .unwrap()
    }

    #[test]
    fn each_users_htpasswd_line_verifies_its_own_password_and_no_other() {
        let generated = Generated::new().unwrap();
        let lines: Vec<(&str, &str)> = generated
            .htpasswd
            .lines()
            .map(|line| line.split_once(':').unwrap())
            .collect();
        let users: Vec<&str> = lines.iter().map(|(user, _)| *user).collect();
        assert_eq!(users, [PULL_USER, PUSH_USER]);
        let (pull, push) = (lines[0].1, lines[1].1);
        assert!(pull.starts_with("$2"), "bcrypt: {pull}");
        assert!(bcrypt::verify(&generated.pull, pull).unwrap());
        assert!(bcrypt::verify(&generated.push, push).unwrap());
        // A leaked pull password is not the push user's.
        assert!(!bcrypt::verify(&generated.pull, push).unwrap());
        assert!(!bcrypt::verify(&generated.push, pull).unwrap());
        assert!(!bcrypt::verify("guess", pull).unwrap());
    }

    #[test]
    fn every_cache_and_direction_gets_its_own_random_password() {
        let one = Generated::new().unwrap();
        let two = Generated::new().unwrap();
        assert_ne!(one.pull, two.pull);
        assert_ne!(one.pull, one.push);
        assert_ne!(one.http_secret, two.http_secret);
        assert_ne!(one.http_secret, one.push);
        assert!(one.pull.len() >= 43, "256 bits: {}", one.pull);
        assert!(one.http_secret.len() >= 43, "256 bits");
        let shown = format!("{one:?}");
        assert!(!shown.contains(&one.pull) && !shown.contains(&one.push));
        assert!(!shown.contains(&one.http_secret));
    }

    #[test]
    fn the_secret_has_a_generated_name_the_cache_as_owner_and_the_step_keys() {
        let generated =
            Generated::from_passwords("pull-pw".into(), "push-pw".into(), "http-pw".into())
                .unwrap();
        let secret = secret(&cache(), &generated).unwrap();
        assert_eq!(secret.metadata.name, None);
        assert_eq!(
            secret.metadata.generate_name.as_deref(),
            Some("oras-registry-credentials-")
        );
        assert_eq!(secret.metadata.namespace.as_deref(), Some("workflow"));
        let owner = &secret.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.uid.as_str(), owner.controller), ("u-1", Some(true)));
        let data = secret.string_data.unwrap();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "ORAS_PULL_PASS",
                "ORAS_PUSH_PASS",
                "ORAS_PUSH_USER",
                "ORAS_USER",
                "htpasswd",
                "httpSecret"
            ]
        );
        assert_eq!(data["httpSecret"], "http-pw");
        assert_eq!(data["ORAS_USER"], "steps-pull");
        assert_eq!(data["ORAS_PULL_PASS"], "pull-pw");
        assert_eq!(data["ORAS_PUSH_USER"], "steps-push");
        assert_eq!(data["ORAS_PUSH_PASS"], "push-pw");
    }
}
