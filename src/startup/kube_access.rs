//! Finding the cluster as kubectl does, for every subcommand that talks to one: `--kubeconfig
//! FILE` alone, else the files `$KUBECONFIG` lists merged (the first to set a key wins, missing
//! files skipped), else `~/.kube/config`, else the in-cluster service account; `--context`
//! picks a context other than the current one.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The variable `ocifit run` read before it read `$KUBECONFIG` like every other subcommand.
pub(super) const DEPRECATED_VARIABLE: &str = "OCIFIT_KUBECONFIG";

/// The flags that say which cluster (and namespace), global to every subcommand and accepted
/// anywhere on the command line, as kubectl's.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeArgs {
    /// The kubeconfig file, alone; else the files $KUBECONFIG lists (`a:b`, merged as kubectl
    /// merges them: the first to set a key wins), else ~/.kube/config, else the in-cluster
    /// service account.
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use; default its current-context.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace of the commands that act in one (`explain pod`, `release-gates`,
    /// `selftest`, `artifact --cache`); default the context's (release-gates: every namespace).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// Where the cluster's configuration comes from.
#[derive(Debug, PartialEq)]
pub(super) enum Source {
    /// Kubeconfig files, merged in this order.
    Files(Vec<PathBuf>),
    /// No kubeconfig: the service account of the pod this runs in.
    InCluster,
}

/// kubectl's rules: the flag's file (which must exist), else `$KUBECONFIG`'s existing files
/// (empty entries and missing files skipped), else `home`'s `.kube/config` when it exists.
pub(super) fn source(
    flag: Option<&Path>,
    variable: Option<&OsStr>,
    home: Option<&Path>,
    exists: impl Fn(&Path) -> bool,
) -> Source {
    if let Some(file) = flag {
        return Source::Files(vec![file.to_owned()]);
    }
    let listed: Vec<PathBuf> = variable
        .map(|value| {
            std::env::split_paths(value)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    let files: Vec<PathBuf> = if listed.is_empty() {
        home.map(|home| home.join(".kube/config"))
            .into_iter()
            .filter(|p| exists(p))
            .collect()
    } else {
        listed.into_iter().filter(|p| exists(p)).collect()
    };
    if files.is_empty() {
        Source::InCluster
    } else {
        Source::Files(files)
    }
}

/// `ocifit run`'s kubeconfig flag: `--kubeconfig`, else the deprecated variable's file (it
/// used to win over `$KUBECONFIG`, and still does for one release); whether that was read.
pub(super) fn with_deprecated(
    flag: Option<PathBuf>,
    deprecated: Option<&OsStr>,
) -> (Option<PathBuf>, bool) {
    match (flag, deprecated.filter(|v| !v.is_empty())) {
        (Some(flag), _) => (Some(flag), false),
        (None, Some(value)) => (Some(PathBuf::from(value)), true),
        (None, None) => (None, false),
    }
}

/// The files merged, each read error naming its file.
fn read_merged(files: &[PathBuf]) -> anyhow::Result<Kubeconfig> {
    files
        .iter()
        .try_fold(Kubeconfig::default(), |merged, file| {
            let next = Kubeconfig::read_from(file)
                .with_context(|| format!("failed to read the kubeconfig {}", file.display()))?;
            merged
                .merge(next)
                .with_context(|| format!("failed to merge the kubeconfig {}", file.display()))
        })
}

/// A client for the cluster `args` and the environment name.
pub async fn kube_client(args: &KubeArgs) -> anyhow::Result<kube::Client> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let variable = std::env::var_os("KUBECONFIG");
    let found = source(
        args.kubeconfig.as_deref(),
        variable.as_deref(),
        home.as_deref(),
        Path::exists,
    );
    let config = match found {
        Source::Files(files) => {
            let merged = read_merged(&files)?;
            let options = KubeConfigOptions {
                context: args.context.clone(),
                ..KubeConfigOptions::default()
            };
            let names = files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(":");
            kube::Config::from_custom_kubeconfig(merged, &options)
                .await
                .with_context(|| match &args.context {
                    Some(context) => {
                        format!("failed to use context {context} of the kubeconfig {names}")
                    }
                    None => format!("failed to use the kubeconfig {names}"),
                })?
        }
        Source::InCluster if args.context.is_some() => anyhow::bail!(
            "--context needs a kubeconfig: none found (--kubeconfig, $KUBECONFIG, ~/.kube/config)"
        ),
        Source::InCluster => kube::Config::incluster().context(
            "failed to find a cluster: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) \
             and no in-cluster service account",
        )?,
    };
    kube::Client::try_from(config).context("failed to build the Kubernetes client")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn the_flag_names_the_only_file_even_when_kubeconfig_lists_others() {
        let found = source(
            Some(Path::new("/flag")),
            Some(OsStr::new("/a:/b")),
            Some(Path::new("/home")),
            |_| false,
        );
        assert_eq!(found, Source::Files(paths(&["/flag"])));
    }

    #[test]
    fn kubeconfig_lists_files_merged_in_order_skipping_empty_entries_and_missing_files() {
        let found = source(
            None,
            Some(OsStr::new("/a::/missing:/b")),
            Some(Path::new("/home")),
            |p| p != Path::new("/missing"),
        );
        assert_eq!(found, Source::Files(paths(&["/a", "/b"])));
    }

    #[test]
    fn without_kubeconfig_the_home_file_else_in_cluster() {
        let home = Some(Path::new("/home"));
        assert_eq!(
            source(None, None, home, |_| true),
            Source::Files(paths(&["/home/.kube/config"]))
        );
        assert_eq!(
            source(None, Some(OsStr::new("")), home, |_| false),
            Source::InCluster
        );
        assert_eq!(source(None, None, None, |_| true), Source::InCluster);
    }

    #[test]
    fn kubeconfig_naming_only_missing_files_means_in_cluster() {
        let found = source(
            None,
            Some(OsStr::new("/gone")),
            Some(Path::new("/home")),
            |_| false,
        );
        assert_eq!(found, Source::InCluster);
    }

    #[test]
    fn the_deprecated_variable_is_read_only_without_the_flag_and_says_so() {
        let old = Some(OsStr::new("/old"));
        assert_eq!(
            with_deprecated(Some("/new".into()), old),
            (Some("/new".into()), false)
        );
        assert_eq!(with_deprecated(None, old), (Some("/old".into()), true));
        assert_eq!(with_deprecated(None, Some(OsStr::new(""))), (None, false));
        assert_eq!(with_deprecated(None, None), (None, false));
    }

    #[test]
    fn merging_keeps_the_first_file_s_value_of_each_key() {
        let first = Kubeconfig::from_yaml(
            "current-context: a\ncontexts:\n- name: a\n  context: {cluster: one, user: u}\n",
        )
        .unwrap();
        let second = Kubeconfig::from_yaml(
            "current-context: b\ncontexts:\n- name: a\n  context: {cluster: two, user: u}\n\
             users:\n- name: u\n  user: {token: t}\n",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, serde_json::to_string(&first).unwrap()).unwrap();
        std::fs::write(&b, serde_json::to_string(&second).unwrap()).unwrap();
        let merged = read_merged(&[a, b]).unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("a"));
        assert_eq!(merged.contexts.len(), 1);
        let context = merged.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.cluster, "one");
        assert_eq!(merged.auth_infos.len(), 1, "the second file's user is kept");
    }
}
