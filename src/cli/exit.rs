//! One table of exit codes for every subcommand (docs/cli.md lists it; a test keeps them equal):
//! each failure maps to its code here, at the binary's edge, so the same failure exits the same
//! way whichever subcommand met it.

use std::process::ExitCode;

/// How a subcommand ended, as its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done: everything asked for was done (or, with `--dry-run`, would be).
    Ok,
    /// The command ran and its answer is a failure: a node class without an image, a pod or
    /// node left unreleased, a failed selftest check, a task that failed in `ocifit run`.
    Failed,
    /// Unusable input: flags, arguments or files (clap's own usage errors exit 2 too), or an
    /// object named on the command line that does not exist.
    Usage,
    /// The cluster cannot be used: no kubeconfig and no in-cluster account, an unknown
    /// context, the apiserver unreachable, or the credentials refused (401/403).
    Cluster,
    /// A registry cannot be used: unreachable, refused the credentials, or has not the artifact.
    Registry,
}

impl Exit {
    /// Every exit status, in the order docs/cli.md lists them.
    pub const ALL: [Exit; 5] = [
        Exit::Ok,
        Exit::Failed,
        Exit::Usage,
        Exit::Cluster,
        Exit::Registry,
    ];

    /// The process's exit status.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Cluster => 3,
            Exit::Registry => 4,
        }
    }

    /// The name docs/cli.md gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failed => "failed",
            Exit::Usage => "usage",
            Exit::Cluster => "cluster",
            Exit::Registry => "registry",
        }
    }

    /// The exit status of a failed Kubernetes API call: the apiserver unreachable or refusing
    /// who we are is the cluster's; an object named that is not there
    /// is the input's; anything else it answered is a failure.
    pub fn of_kube(err: &kube::Error) -> Exit {
        match err {
            kube::Error::Api(status) => match status.code {
                401 | 403 => Exit::Cluster,
                404 => Exit::Usage,
                _ => Exit::Failed,
            },
            kube::Error::Auth(_)
            | kube::Error::HyperError(_)
            | kube::Error::Service(_)
            | kube::Error::HttpError(_)
            | kube::Error::RustlsTls(_)
            | kube::Error::InferConfig(_) => Exit::Cluster,
            _ => Exit::Failed,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("refused", "Refused")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn every_code_is_distinct_and_ok_is_zero() {
        let codes: std::collections::BTreeSet<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes.len(), Exit::ALL.len());
        assert_eq!(Exit::Ok.code(), 0);
    }

    #[test]
    fn refused_credentials_are_the_cluster_s_and_a_missing_object_the_input_s() {
        assert_eq!(Exit::of_kube(&api(401)), Exit::Cluster);
        assert_eq!(Exit::of_kube(&api(403)), Exit::Cluster);
        assert_eq!(Exit::of_kube(&api(404)), Exit::Usage);
        assert_eq!(Exit::of_kube(&api(500)), Exit::Failed);
    }
}
