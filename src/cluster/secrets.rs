//! Reading Secrets, the one way any feature does: one `get` by name, only in the namespaces the
//! admin allowed (`--pull-secret-namespaces`; default the operator's own). Nothing lists or
//! watches Secrets, so a changed Secret is seen by reading it again: whoever needs one reads it
//! each time it acts on it. A namespace outside the list is refused before any request, so no
//! answer can tell whether a Secret exists there.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

/// What `--pull-secret-namespaces` names as an entry for every namespace.
pub(super) const EVERY_NAMESPACE: &str = "*";

/// The namespaces Secrets may be read in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretNamespaces {
    /// Every namespace (`*`; the RBAC is a ClusterRole with `get` on Secrets).
    Every,
    /// These namespaces only (a Role with `get` in each).
    Only(BTreeSet<String>),
}

impl SecretNamespaces {
    /// The namespaces a flag lists: `*` means every namespace, none means `own` only.
    pub fn from_list(list: &[String], own: &str) -> SecretNamespaces {
        let names: BTreeSet<String> = list
            .iter()
            .map(|name| name.trim())
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect();
        if names.contains(EVERY_NAMESPACE) {
            SecretNamespaces::Every
        } else if names.is_empty() {
            SecretNamespaces::Only([own.to_owned()].into())
        } else {
            SecretNamespaces::Only(names)
        }
    }

    /// Whether Secrets in `namespace` may be read.
    pub fn allows(&self, namespace: &str) -> bool {
        match self {
            SecretNamespaces::Every => true,
            SecretNamespaces::Only(names) => names.contains(namespace),
        }
    }
}

impl Default for SecretNamespaces {
    fn default() -> Self {
        SecretNamespaces::Only(BTreeSet::new())
    }
}

impl fmt::Display for SecretNamespaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretNamespaces::Every => f.write_str("every namespace"),
            SecretNamespaces::Only(names) if names.is_empty() => f.write_str("none"),
            SecretNamespaces::Only(names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                f.write_str(&names.join(", "))
            }
        }
    }
}

/// A Secret read by name, or why there is none.
#[derive(Debug)]
pub enum SecretRead {
    Found(Box<Secret>),
    /// No Secret by that name in an allowed namespace.
    Missing,
    /// The namespace is not one Secrets may be read in: nothing was asked.
    NotAllowed,
    /// The apiserver refused the read (RBAC not matching the flag); its message.
    Forbidden(String),
}

/// Reads Secrets by name in the allowed namespaces. Cheap to clone.
#[derive(Clone)]
pub struct Secrets {
    client: Client,
    allowed: SecretNamespaces,
}

impl Secrets {
    /// A reader through `client`, limited to `allowed`.
    pub fn new(client: Client, allowed: SecretNamespaces) -> Secrets {
        Secrets { client, allowed }
    }

    /// The namespaces this reader may read in.
    pub fn allowed(&self) -> &SecretNamespaces {
        &self.allowed
    }

    /// The Secret `namespace/name`, with one `get`, when `namespace` is allowed.
    pub async fn get(&self, namespace: &str, name: &str) -> Result<SecretRead, kube::Error> {
        if !self.allowed.allows(namespace) {
            return Ok(SecretRead::NotAllowed);
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        match api.get_opt(name).await {
            Ok(Some(secret)) => Ok(SecretRead::Found(Box::new(secret))),
            Ok(None) => Ok(SecretRead::Missing),
            Err(kube::Error::Api(status)) if status.code == 403 => {
                Ok(SecretRead::Forbidden(status.message))
            }
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn no_namespace_listed_means_the_operators_own() {
        let allowed = SecretNamespaces::from_list(&[], "ocifit-system");
        assert!(allowed.allows("ocifit-system"));
        assert!(!allowed.allows("default"));
        assert_eq!(allowed.to_string(), "ocifit-system");
    }

    #[test]
    fn listed_namespaces_replace_the_own_one() {
        let allowed = SecretNamespaces::from_list(&list(&["team-a", " team-b", ""]), "ocifit");
        assert!(allowed.allows("team-a") && allowed.allows("team-b"));
        assert!(!allowed.allows("ocifit"));
        assert_eq!(allowed.to_string(), "team-a, team-b");
    }

    #[tokio::test]
    async fn a_namespace_outside_the_list_is_refused_without_asking_the_apiserver() {
        // Nothing listens there: any request would be an error, not an answer.
        let client =
            Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let secrets = Secrets::new(client, SecretNamespaces::from_list(&[], "ocifit-system"));
        assert!(matches!(
            secrets.get("kube-system", "anything").await,
            Ok(SecretRead::NotAllowed)
        ));
        assert!(secrets.get("ocifit-system", "regcred").await.is_err());
    }

    #[test]
    fn a_star_allows_every_namespace() {
        let allowed = SecretNamespaces::from_list(&list(&["team-a", "*"]), "ocifit");
        assert_eq!(allowed, SecretNamespaces::Every);
        assert!(allowed.allows("anything"));
    }
}
