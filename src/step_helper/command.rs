//! The helper's command line, defined once: the step planner builds a container's arguments with
//! [`Prepare::to_args`], [`Launch::to_args`] and [`Deliver::to_args`], and `ocifit artifact`
//! parses them with clap from the same structs, so what is injected is what the helper reads.
//! `PATH[:MEDIA_TYPE]` push arguments are read as `oras push` reads them ([`parse_file_ref`]:
//! split at the last ':', so `a:b.txt:` is a path holding ':' with the default type).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use super::Limits;
use super::{DEFAULT_COMPRESSION, PUSH_TIMEOUT};

/// The `ocifit` subcommand every helper command sits under.
pub(super) const ARTIFACT: &str = "artifact";
/// Where the helpers (and a launched step) see the pulled inputs.
pub const INPUTS_DIR: &str = "/ocifit/inputs";
/// Room for every flag and value a command line may carry besides its lists, so the planner's
/// arguments are not copied as they grow.
const FLAGS_ROOM: usize = 20;

/// How the transfers reach the registry and lay out directories, shared by the commands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct Transfer {
    /// Reach the registry over plain HTTP (e.g. an ArtifactCache inside the cluster).
    #[arg(long)]
    pub plain_http: bool,
    /// Keep directories as .tar.gz files instead of unpacking them (the `unpack: "false"`
    /// annotation).
    #[arg(long)]
    pub no_unpack: bool,
}

impl Transfer {
    fn push_args(&self, args: &mut Vec<OsString>) {
        flag(args, "--plain-http", self.plain_http);
        flag(args, "--no-unpack", self.no_unpack);
    }
}

/// A step's init container: install the launcher, pull the inputs.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct Prepare {
    /// Artifacts to pull before the step, in order.
    #[arg(long = "input")]
    pub inputs: Vec<String>,
    /// The directory the inputs are pulled into (the volume the step sees at input-path).
    #[arg(long = "into", default_value = INPUTS_DIR)]
    pub inputs_dir: PathBuf,
    /// Install the launcher (ocifit, its loader and libraries) into this directory.
    #[arg(long)]
    pub launcher: Option<PathBuf>,
    /// Where the report (what was pulled, or why not) is written for `kubectl describe pod`
    /// and the artifact cache's metrics.
    #[arg(long)]
    pub termination_log: Option<PathBuf>,
    /// Log the settings.
    #[arg(long)]
    pub debug: bool,
    #[command(flatten)]
    pub transfer: Transfer,
    #[command(flatten)]
    pub limits: Limits,
}

impl Prepare {
    /// `artifact prepare …`, the arguments of the helper's image.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::with_capacity(FLAGS_ROOM + 2 * self.inputs.len());
        args.extend([ARTIFACT.into(), "prepare".into()]);
        for input in &self.inputs {
            args.extend(["--input".into(), input.into()]);
        }
        args.extend(["--into".into(), self.inputs_dir.clone().into()]);
        option(&mut args, "--launcher", self.launcher.as_ref());
        self.transfer.push_args(&mut args);
        let defaults = Limits::default();
        if self.limits.max_bytes != defaults.max_bytes {
            args.extend([
                "--max-bytes".into(),
                self.limits.max_bytes.to_string().into(),
            ]);
        }
        if self.limits.max_entries != defaults.max_entries {
            let entries = self.limits.max_entries.to_string();
            args.extend(["--max-entries".into(), entries.into()]);
        }
        flag(&mut args, "--debug", self.debug);
        option(
            &mut args,
            "--termination-log",
            self.termination_log.as_ref(),
        );
        args
    }
}

/// A step's command, run by the launcher: the command, then its outputs handed to the pusher.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct Launch {
    /// The run volume shared with the pusher.
    #[arg(long)]
    pub run: PathBuf,
    /// Where a failure is written for `kubectl describe pod`.
    #[arg(long)]
    pub termination_log: Option<PathBuf>,
    /// The inputs the init container pulled: copied into --input-path before the command runs.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Where the inputs are copied (relative to the working directory); the working directory
    /// when unset.
    #[arg(long, requires = "inputs")]
    pub input_path: Option<PathBuf>,
    /// The file or directory to push when the step succeeds (relative to the working directory);
    /// `.` pushes each entry of the working directory.
    #[arg(long)]
    pub push: Option<PathBuf>,
    /// Write the command's standard output to this file.
    #[arg(long)]
    pub pipe: Option<PathBuf>,
    /// The longest wait for the pusher, in seconds.
    #[arg(long, default_value_t = PUSH_TIMEOUT.as_secs())]
    pub push_timeout: u64,
    /// Log the settings.
    #[arg(long)]
    pub debug: bool,
    /// The step's command and arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

impl Launch {
    /// `artifact launch … -- COMMAND…`, after the launcher's own path (its loader runs it).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::with_capacity(FLAGS_ROOM + self.command.len());
        args.extend([
            ARTIFACT.into(),
            "launch".into(),
            "--run".into(),
            self.run.clone().into(),
        ]);
        option(
            &mut args,
            "--termination-log",
            self.termination_log.as_ref(),
        );
        option(&mut args, "--inputs", self.inputs.as_ref());
        option(&mut args, "--input-path", self.input_path.as_ref());
        option(&mut args, "--push", self.push.as_ref());
        option(&mut args, "--pipe", self.pipe.as_ref());
        if self.push_timeout != PUSH_TIMEOUT.as_secs() {
            args.extend([
                "--push-timeout".into(),
                self.push_timeout.to_string().into(),
            ]);
        }
        flag(&mut args, "--debug", self.debug);
        args.push("--".into());
        args.extend(self.command.iter().cloned());
        args
    }
}

/// A step's pushing sidecar: push the outputs the launcher hands over, until SIGTERM.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct Deliver {
    /// The run volume shared with the launcher.
    #[arg(long)]
    pub run: PathBuf,
    /// Where the outputs go (`registry/repository:tag`).
    #[arg(long)]
    pub to: String,
    /// gzip level of directory layers (0 stores, 9 compresses most).
    #[arg(long, default_value_t = DEFAULT_COMPRESSION, value_parser = clap::value_parser!(u32).range(0..=9))]
    pub compression_level: u32,
    /// Where the report (what was pushed) is written when the sidecar stops, for the artifact
    /// cache's metrics.
    #[arg(long)]
    pub termination_log: Option<PathBuf>,
    /// Log the settings.
    #[arg(long)]
    pub debug: bool,
    #[command(flatten)]
    pub transfer: Transfer,
}

impl Deliver {
    /// `artifact deliver …`, the arguments of the helper's image.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::with_capacity(FLAGS_ROOM);
        args.extend([
            ARTIFACT.into(),
            "deliver".into(),
            "--run".into(),
            self.run.clone().into(),
            "--to".into(),
            self.to.clone().into(),
        ]);
        if self.compression_level != DEFAULT_COMPRESSION {
            args.extend([
                "--compression-level".into(),
                self.compression_level.to_string().into(),
            ]);
        }
        option(
            &mut args,
            "--termination-log",
            self.termination_log.as_ref(),
        );
        self.transfer.push_args(&mut args);
        flag(&mut args, "--debug", self.debug);
        args
    }
}

/// Arguments as a container's `args` or `command` (the paths and references ocifit writes are
/// UTF-8; a step's own command came from the pod spec, which is).
pub fn strings(args: Vec<OsString>) -> Vec<String> {
    args.into_iter()
        .map(|arg| {
            arg.into_string()
                .unwrap_or_else(|arg| arg.to_string_lossy().into_owned())
        })
        .collect()
}

fn flag(args: &mut Vec<OsString>, name: &str, set: bool) {
    if set {
        args.push(name.into());
    }
}

fn option(args: &mut Vec<OsString>, name: &str, value: Option<&PathBuf>) {
    if let Some(value) = value {
        args.extend([name.into(), value.clone().into()]);
    }
}

/// A path to push and the media type its layer is given (`None`: the ORAS default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushPath {
    pub path: PathBuf,
    pub media_type: Option<String>,
}

impl PushPath {
    /// A path pushed with the default media type.
    pub fn plain(path: impl Into<PathBuf>) -> Self {
        PushPath {
            path: path.into(),
            media_type: None,
        }
    }
}

/// Why a push argument names no path and type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileRefError {
    #[error("{0:?} names no file to push before its ':'")]
    EmptyPath(String),
    #[error(
        "in {arg:?}, {media_type:?} is not a media type (type/subtype); a path that holds ':' is \
         written with a trailing ':' (e.g. a:b.txt:)"
    )]
    MediaType { arg: String, media_type: String },
}

/// Reads one push argument.
pub fn parse_file_ref(arg: &str) -> Result<PushPath, FileRefError> {
    let Some((path, media_type)) = arg.rsplit_once(':') else {
        return Ok(PushPath::plain(arg));
    };
    if path.is_empty() {
        return Err(FileRefError::EmptyPath(arg.to_string()));
    }
    if media_type.is_empty() {
        return Ok(PushPath::plain(path));
    }
    if !is_media_type(media_type) {
        return Err(FileRefError::MediaType {
            arg: arg.to_string(),
            media_type: media_type.to_string(),
        });
    }
    Ok(PushPath {
        path: PathBuf::from(path),
        media_type: Some(media_type.to_string()),
    })
}

/// RFC 6838's `type/subtype`: each a restricted name of at most 127 characters.
fn is_media_type(text: &str) -> bool {
    let restricted = |name: &str| {
        name.len() <= 127
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && name.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(
                        b,
                        b'!' | b'#' | b'$' | b'&' | b'-' | b'^' | b'_' | b'.' | b'+'
                    )
            })
    };
    text.split_once('/')
        .is_some_and(|(kind, subtype)| restricted(kind) && restricted(subtype))
}

#[cfg(test)]
mod tests {
    use clap::{Parser, Subcommand};

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        top: Top,
    }

    #[derive(Debug, Subcommand)]
    enum Top {
        Artifact {
            #[command(subcommand)]
            command: Command,
        },
    }

    #[derive(Debug, PartialEq, Subcommand)]
    enum Command {
        Prepare(Prepare),
        Launch(Launch),
        Deliver(Deliver),
    }

    fn parsed(args: Vec<OsString>) -> Command {
        let argv = std::iter::once(OsString::from("ocifit")).chain(args);
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                top: Top::Artifact { command },
            }) => command,
            Err(err) => panic!("the injected arguments do not parse: {err}"),
        }
    }

    #[test]
    fn prepare_parses_back_to_itself() {
        let prepare = Prepare {
            inputs: vec!["cache:5000/a:1".into(), "cache:5000/b@sha256:00".into()],
            inputs_dir: INPUTS_DIR.into(),
            launcher: Some("/ocifit/run/bin".into()),
            termination_log: Some("/dev/termination-log".into()),
            debug: true,
            transfer: Transfer {
                plain_http: true,
                no_unpack: true,
            },
            limits: Limits {
                max_bytes: 1024,
                max_entries: 3,
            },
        };
        assert_eq!(parsed(prepare.to_args()), Command::Prepare(prepare.clone()));
        let bare = Prepare {
            inputs: Vec::new(),
            launcher: None,
            termination_log: None,
            debug: false,
            transfer: Transfer::default(),
            limits: Limits::default(),
            ..prepare
        };
        assert_eq!(parsed(bare.to_args()), Command::Prepare(bare));
    }

    #[test]
    fn launch_parses_back_to_itself_with_the_steps_own_flags_after_the_separator() {
        let launch = Launch {
            run: "/ocifit/run".into(),
            termination_log: Some("/tmp/why".into()),
            inputs: Some(INPUTS_DIR.into()),
            input_path: Some("in".into()),
            push: Some(".".into()),
            pipe: Some("out.txt".into()),
            push_timeout: 7,
            debug: true,
            command: vec!["sh".into(), "-c".into(), "--debug --push x".into()],
        };
        assert_eq!(parsed(launch.to_args()), Command::Launch(launch.clone()));
        let bare = Launch {
            termination_log: None,
            inputs: None,
            input_path: None,
            push: None,
            pipe: None,
            push_timeout: PUSH_TIMEOUT.as_secs(),
            debug: false,
            command: vec!["--help".into()],
            ..launch
        };
        assert_eq!(parsed(bare.to_args()), Command::Launch(bare));
    }

    #[test]
    fn deliver_parses_back_to_itself() {
        let deliver = Deliver {
            run: "/ocifit/run".into(),
            to: "cache:5000/out:1".into(),
            compression_level: 9,
            termination_log: Some("/dev/termination-log".into()),
            debug: true,
            transfer: Transfer {
                plain_http: true,
                no_unpack: false,
            },
        };
        assert_eq!(parsed(deliver.to_args()), Command::Deliver(deliver.clone()));
        let bare = Deliver {
            compression_level: DEFAULT_COMPRESSION,
            termination_log: None,
            debug: false,
            transfer: Transfer::default(),
            ..deliver
        };
        assert_eq!(parsed(bare.to_args()), Command::Deliver(bare));
    }

    /// The tests of what was `file_ref.rs`.
    mod file_ref {
        use super::*;

        #[test]
        fn a_media_type_after_the_last_colon_types_the_layer() {
            assert_eq!(
                parse_file_ref("a.txt:text/plain"),
                Ok(PushPath {
                    path: "a.txt".into(),
                    media_type: Some("text/plain".into())
                })
            );
            assert_eq!(
                parse_file_ref("dir/conf.json:application/vnd.acme.config.v1+json")
                    .unwrap()
                    .media_type
                    .as_deref(),
                Some("application/vnd.acme.config.v1+json")
            );
            assert_eq!(parse_file_ref("a.txt"), Ok(PushPath::plain("a.txt")));
        }

        #[test]
        fn a_path_holding_a_colon_is_written_with_a_trailing_one_as_with_oras() {
            assert_eq!(parse_file_ref("a:b.txt:"), Ok(PushPath::plain("a:b.txt")));
            assert_eq!(
                parse_file_ref("a:b.txt:text/plain").unwrap().path,
                PathBuf::from("a:b.txt")
            );
            let err = parse_file_ref("a:b.txt").unwrap_err();
            assert_eq!(
                err,
                FileRefError::MediaType {
                    arg: "a:b.txt".into(),
                    media_type: "b.txt".into()
                }
            );
            assert!(err.to_string().contains("a:b.txt:"), "{err}");
            assert_eq!(
                parse_file_ref(":text/plain"),
                Err(FileRefError::EmptyPath(":text/plain".into()))
            );
        }
    }
}
