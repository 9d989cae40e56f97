//! Why an image could not be inspected, and how that reads where pod authors see it.

use std::time::Duration;

use crate::registry::error::Error;

/// Why an image could not be inspected.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InspectError {
    /// The registry answered with an error, or could not be reached.
    #[error(transparent)]
    Registry(#[from] Error),
    /// The registry failed recently and is being left alone.
    #[error(
        "not asking {registry} about {image} for another {}s: it failed recently ({last_error})",
        retry_in.as_secs().max(1)
    )]
    BackingOff {
        registry: String,
        image: String,
        retry_in: Duration,
        last_error: String,
    },
}

impl InspectError {
    /// The kind of failure as a metric label: the registry error's kind, or `backing_off`.
    pub fn kind_label(&self) -> &'static str {
        match self {
            InspectError::Registry(error) => error.kind().as_str(),
            InspectError::BackingOff { .. } => "backing_off",
        }
    }

    /// What went wrong, in words safe to show whoever reads the pod's Events and annotations:
    /// the kind of failure, never the registry's own text, an address it redirected to or
    /// resolved to, or a response body (ocifit's log has the whole error).
    pub fn summary(&self) -> String {
        let error = match self {
            InspectError::BackingOff { retry_in, .. } => {
                return format!(
                    "not asked: its registry failed recently (next try in {}s)",
                    retry_in.as_secs().max(1)
                );
            }
            InspectError::Registry(error) => error,
        };
        match error {
            // The pod's own text, clipped.
            Error::InvalidReference { .. } => error.to_string(),
            Error::NotFound { what, .. } => format!("{what} not found"),
            Error::Unauthorized { .. } => {
                "unauthorized: the registry refused the pod's pull credentials (or anonymous access)"
                    .to_owned()
            }
            Error::RateLimited { .. } => "rate limited by the registry".to_owned(),
            Error::InvalidContent { .. } => {
                "the registry's answer is not a valid image manifest or index".to_owned()
            }
            Error::Transport { .. } => {
                "the registry could not be reached, failed, or did not answer in time".to_owned()
            }
            Error::Deadline {
                deadline,
                waiting_for_slot,
                ..
            } => format!(
                "{} within the lookup deadline of {}s",
                if *waiting_for_slot {
                    "no inspection slot was free"
                } else {
                    "no answer"
                },
                deadline.as_secs()
            ),
            Error::NotAllowed { why, .. } => format!("refused: {why}"),
            Error::Config(_) => {
                "ocifit's registry client configuration is unusable (see ocifit's log)".to_owned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Refusal, Target};

    fn target() -> Target {
        Target {
            registry: "registry.tenant.example".into(),
            repository: "app".into(),
            reference: "v1".into(),
        }
    }

    #[test]
    fn a_summary_names_the_kind_of_failure_and_never_what_the_registry_or_network_said() {
        let internal = [
            Error::Transport {
                target: target(),
                detail: "error sending request for url (http://10.96.0.12:5000/v2/): \
                         connection refused"
                    .into(),
                source: None,
            },
            Error::NotAllowed {
                target: target(),
                host: "metadata.internal:80".into(),
                why: Refusal::RedirectHost,
            },
            Error::Deadline {
                target: target(),
                deadline: Duration::from_secs(30),
                waiting_for_slot: false,
            },
        ];
        for error in internal {
            let summary = InspectError::Registry(error.clone()).summary();
            for secret in ["10.96.0.12", "metadata.internal", "connection refused"] {
                assert!(!summary.contains(secret), "{summary:?} from {error}");
            }
        }
        let cooling = InspectError::BackingOff {
            registry: "registry.tenant.example".into(),
            image: "registry.tenant.example/app:v1".into(),
            retry_in: Duration::from_secs(4),
            last_error: "error sending request for url (http://10.96.0.12:5000/v2/)".into(),
        };
        assert_eq!(
            cooling.summary(),
            "not asked: its registry failed recently (next try in 4s)"
        );
        assert_eq!(
            InspectError::Registry(Error::Deadline {
                target: target(),
                deadline: Duration::from_secs(30),
                waiting_for_slot: true,
            })
            .summary(),
            "no inspection slot was free within the lookup deadline of 30s"
        );
        assert_eq!(
            InspectError::Registry(Error::NotFound {
                target: target(),
                what: "tag",
            })
            .summary(),
            "tag not found"
        );
    }

    #[test]
    fn a_failure_is_labelled_by_its_kind_for_the_metrics() {
        let refused = InspectError::Registry(Error::Transport {
            target: target(),
            detail: "connection refused".into(),
            source: None,
        });
        assert_eq!(refused.kind_label(), "transport");
        let missing = InspectError::Registry(Error::NotFound {
            target: target(),
            what: "tag",
        });
        assert_eq!(missing.kind_label(), "not_found");
        let cooling = InspectError::BackingOff {
            registry: "registry.tenant.example".into(),
            image: "registry.tenant.example/app:v1".into(),
            retry_in: Duration::from_secs(4),
            last_error: String::new(),
        };
        assert_eq!(cooling.kind_label(), "backing_off");
    }
}
