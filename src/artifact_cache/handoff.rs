//! The hand-off between a step's launcher and its pusher, through files in the run volume both
//! mount. When the step succeeds, the launcher copies its outputs to `outputs-<id>/` and writes
//! `request` (naming `<id>`); the pusher pushes them and writes `result-<id>`; the launcher exits
//! with that result. Every file appears whole (written beside, then renamed), ids make a restarted
//! step's request a new one, and a restarted pusher finds a request it has not answered. A failed
//! step writes nothing, so nothing of it is ever pushed.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The file naming the outputs to push.
pub const REQUEST: &str = "request";
/// How often a side looks for the other's file.
pub const POLL: Duration = Duration::from_millis(100);

/// What the launcher asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// This run of the step.
    pub id: String,
    /// The outputs' directory, relative to the run volume (one entry: the file or directory to
    /// push).
    pub outputs: String,
}

/// What the pusher answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Pushed: the reference and the manifest's digest.
    Pushed { reference: String, digest: String },
    /// Not pushed, and why.
    Failed { message: String },
}

impl Request {
    /// A request for a new run; its outputs go to `outputs-<id>`.
    pub fn new(id: String) -> Self {
        Request {
            outputs: format!("outputs-{id}"),
            id,
        }
    }

    /// The file the answer to this request is written to.
    pub fn result_file(&self) -> String {
        format!("result-{}", self.id)
    }
}

/// Writes `value` as JSON to `dir/name`, whole: to a temporary name first, then renamed.
pub fn write<T: Serialize>(dir: &Path, name: &str, value: &T) -> io::Result<()> {
    let json = serde_json::to_vec(value).map_err(io::Error::other)?;
    let partial = dir.join(format!(".{name}.partial"));
    fs::write(&partial, json)?;
    fs::rename(&partial, dir.join(name))
}

/// Reads `dir/name` when it is there (and whole).
pub fn read<T: for<'de> Deserialize<'de>>(dir: &Path, name: &str) -> io::Result<Option<T>> {
    match fs::read(dir.join(name)) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// Copies a step's output (a file or a directory tree) to `into/<its name>`, readable by the
/// pusher whatever user it runs as: modes keep their bits and gain read (and, for directories,
/// search) for everyone. Symbolic links stay links. The copy's path.
pub fn stage(output: &Path, into: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let named = fs::canonicalize(output)?;
    let name = named
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the output has no name"))?;
    fs::create_dir_all(into)?;
    let staged = into.join(name);
    let readable = |path: &Path, extra: u32| -> io::Result<()> {
        let mode = fs::symlink_metadata(path)?.permissions().mode() & 0o7777;
        fs::set_permissions(path, fs::Permissions::from_mode(mode | extra))
    };
    if fs::metadata(output)?.is_file() {
        fs::copy(output, &staged)?;
        readable(&staged, 0o444)?;
        return Ok(staged);
    }
    for entry in walkdir::WalkDir::new(output).follow_links(false) {
        let entry = entry.map_err(io::Error::from)?;
        let relative = entry.path().strip_prefix(output).unwrap_or(Path::new(""));
        let to = staged.join(relative);
        let kind = entry.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&to)?;
            readable(&to, 0o755)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &to)?;
            readable(&to, 0o444)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(entry.path())?, &to)?;
        }
    }
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_request_and_its_outcome_travel_whole_through_files() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read::<Request>(dir.path(), REQUEST).unwrap(), None);
        let request = Request::new("7-1".into());
        write(dir.path(), REQUEST, &request).unwrap();
        assert_eq!(read(dir.path(), REQUEST).unwrap(), Some(request.clone()));
        assert_eq!(request.outputs, "outputs-7-1");
        let outcome = Outcome::Failed {
            message: "unauthorized".into(),
        };
        write(dir.path(), &request.result_file(), &outcome).unwrap();
        assert_eq!(read(dir.path(), "result-7-1").unwrap(), Some(outcome));
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with(".partial")), "{names:?}");
    }

    #[test]
    fn a_torn_file_is_an_error_not_a_request() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(REQUEST), b"{\"id\":").unwrap();
        assert_eq!(
            read::<Request>(dir.path(), REQUEST).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn staged_outputs_are_a_readable_copy_under_their_name() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("work/results");
        fs::create_dir_all(results.join("sub")).unwrap();
        fs::write(results.join("sub/secret-mode.txt"), b"x").unwrap();
        fs::set_permissions(
            results.join("sub/secret-mode.txt"),
            fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        std::os::unix::fs::symlink("sub/secret-mode.txt", results.join("link")).unwrap();
        let staged = stage(&results, &dir.path().join("run/outputs-1")).unwrap();
        assert_eq!(staged, dir.path().join("run/outputs-1/results"));
        let copied = staged.join("sub/secret-mode.txt");
        assert_eq!(fs::read(&copied).unwrap(), b"x");
        assert_eq!(
            fs::metadata(&copied).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(
            fs::read_link(staged.join("link")).unwrap(),
            Path::new("sub/secret-mode.txt")
        );

        let file = dir.path().join("work/pancakes.txt");
        fs::write(&file, b"blueberry").unwrap();
        let staged = stage(&file, &dir.path().join("run/outputs-2")).unwrap();
        assert_eq!(fs::read(staged).unwrap(), b"blueberry");
    }

    #[test]
    fn a_missing_output_cannot_be_staged() {
        let dir = tempfile::tempdir().unwrap();
        let err = stage(&dir.path().join("nothing"), dir.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
