//! Which credentials to try for a pod's image, as the kubelet would: the pod's
//! `imagePullSecrets` in order, then its ServiceAccount's (the ServiceAccount admission plugin
//! copies those into pods that name none; reading them too covers clusters without it), then
//! ocifit's own (for registries the nodes reach with node credentials) when the pod's policy opts
//! in (`spec.operatorCredentials`), never otherwise. Each Secret contributes
//! its most specific entry for the image; anonymous access when none matches. Pure: the Secrets
//! are read by the caller.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;

use super::policy::Policy;
use crate::registry::{Credentials, DockerConfig, Reference};

const DOCKER_CONFIG_JSON: (&str, &str) = ("kubernetes.io/dockerconfigjson", ".dockerconfigjson");
const DOCKER_CFG: (&str, &str) = ("kubernetes.io/dockercfg", ".dockercfg");

/// A pull Secret that could not be used, for an Event on the pod; the kubelet skips such
/// Secrets too, so the others are still tried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretProblem {
    #[error("pull secret {0} does not exist")]
    Missing(String),
    #[error(
        "pull secret {name} has type {found:?}, not kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg"
    )]
    WrongType { name: String, found: String },
    #[error("pull secret {name} is not a docker config: {message}")]
    Invalid { name: String, message: String },
    #[error(
        "pull secret {name} is in namespace {namespace}, where ocifit may not read Secrets: add the \
         namespace to the chart's pullSecrets.namespaces (--pull-secret-namespaces), or give ocifit \
         the registry's credentials with --placement-docker-config (used for policies with \
         operatorCredentials: true)"
    )]
    NotAllowed { name: String, namespace: String },
    #[error("failed to read pull secret {name}: {message}")]
    Unreadable { name: String, message: String },
}

/// The pull Secrets named for a pod, read once, as docker configs in the order they apply.
#[derive(Debug, Clone, Default)]
pub struct PullSecrets {
    configs: Vec<DockerConfig>,
    /// Secrets that could not be used.
    pub problems: Vec<SecretProblem>,
}

impl PullSecrets {
    /// Reads the Secrets `names` (the pod's, then its ServiceAccount's; repeats ignored) from
    /// `secrets`, the ones the caller could read in the pod's namespace.
    pub fn read<'a>(
        names: impl IntoIterator<Item = &'a str>,
        secrets: &BTreeMap<String, Secret>,
    ) -> Self {
        let mut read = PullSecrets::default();
        let mut seen: Vec<&str> = Vec::new();
        for name in names {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            match docker_config(name, secrets.get(name)) {
                Ok(config) => read.configs.push(config),
                Err(problem) => read.problems.push(problem),
            }
        }
        read
    }

    /// The credentials to try for `image`, in order, without repeats: one per Secret that has
    /// an entry for it, then `operator`'s when given. Empty: anonymous.
    pub fn for_image(
        &self,
        image: &Reference,
        operator: Option<&DockerConfig>,
    ) -> Vec<Credentials> {
        let mut found: Vec<Credentials> = Vec::new();
        for config in self.configs.iter().chain(operator) {
            if let Some(credentials) = config.lookup(image.registry(), image.repository())
                && !found.contains(credentials)
            {
                found.push(credentials.clone());
            }
        }
        found
    }
}

fn docker_config(name: &str, secret: Option<&Secret>) -> Result<DockerConfig, SecretProblem> {
    let secret = secret.ok_or_else(|| SecretProblem::Missing(name.to_owned()))?;
    let kind = secret.type_.as_deref().unwrap_or_default();
    let key = [DOCKER_CONFIG_JSON, DOCKER_CFG]
        .iter()
        .find(|(type_, _)| *type_ == kind)
        .map(|(_, key)| *key)
        .ok_or_else(|| SecretProblem::WrongType {
            name: name.to_owned(),
            found: kind.to_owned(),
        })?;
    let data = secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .ok_or_else(|| SecretProblem::Invalid {
            name: name.to_owned(),
            message: format!("it has no {key} key"),
        })?;
    DockerConfig::from_json(&data.0).map_err(|err| SecretProblem::Invalid {
        name: name.to_owned(),
        message: err.to_string(),
    })
}

/// ocifit's own credentials, for the pods of `policy` when it opted in; `None` otherwise.
pub(crate) fn operator_credentials<'a>(
    policy: &Policy,
    own: &'a DockerConfig,
) -> Option<&'a DockerConfig> {
    policy.operator_credentials.then_some(own)
}

#[cfg(test)]
mod tests;
