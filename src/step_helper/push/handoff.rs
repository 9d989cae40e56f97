//! The hand-off between a step's launcher and its pusher, through files in the run volume both
//! mount: on success the launcher copies its outputs to `outputs-<id>/` and writes `request`; the
//! pusher pushes them and writes `result-<id>`; the launcher exits with that result. Every file
//! appears whole (written beside, then renamed), ids make a restarted step's request new, a
//! restarted pusher finds a request it has not answered, and a failed step writes nothing. The
//! step's code can write the run volume too, so the pusher trusts only the content: the request
//! carries only a plain-token id, the directory and the reference pushed to are the pusher's own
//! (its command line), and no file is read or written through a symbolic link.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The file naming the outputs to push.
pub(crate) const REQUEST: &str = "request";
/// How often a side looks for the other's file.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The longest id a request may carry.
const MAX_ID: usize = 64;
/// The largest hand-off file read: a request or an answer is a few hundred bytes.
const MAX_FILE: u64 = 64 * 1024;

/// What the launcher asks: to push the outputs of this run of the step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Request {
    /// This run of the step: letters, digits and `-` only.
    pub id: String,
}

/// What the pusher answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Outcome {
    /// Pushed: the reference and the manifest's digest.
    Pushed { reference: String, digest: String },
    /// Not pushed, and why.
    Failed { message: String },
}

/// A request's id that is not a plain token (it could name files of another run or outside the
/// run volume).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the request's id {shown:?} is not 1 to {MAX_ID} letters, digits or '-'")]
pub(crate) struct BadId {
    /// The id, cut after one character too many.
    shown: String,
}

impl Request {
    /// A request for a new run.
    pub(crate) fn new(id: String) -> Self {
        Request { id }
    }

    /// The id, when it is a plain token that names nothing but files of this run.
    pub(crate) fn checked_id(&self) -> Result<&str, BadId> {
        let plain = !self.id.is_empty()
            && self.id.len() <= MAX_ID
            && self
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if plain {
            Ok(&self.id)
        } else {
            Err(BadId {
                shown: self.id.chars().take(MAX_ID + 1).collect(),
            })
        }
    }

    /// The directory, in the run volume, holding the outputs to push (one entry: the file or
    /// directory).
    pub(crate) fn outputs(&self) -> String {
        format!("outputs-{}", self.id)
    }

    /// The file the answer to this request is written to.
    pub(crate) fn result_file(&self) -> String {
        format!("result-{}", self.id)
    }
}

/// Writes `value` as JSON to `dir/name`, whole: to a temporary name first (created new, so a link
/// put there is replaced, never written through), then renamed.
pub(crate) fn write<T: Serialize>(dir: &Path, name: &str, value: &T) -> io::Result<()> {
    use std::io::Write;
    let json = serde_json::to_vec(value).map_err(io::Error::other)?;
    let partial = dir.join(format!(".{name}.partial"));
    match fs::remove_file(&partial) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
        _ => {}
    }
    let mut file = fs::File::create_new(&partial)?;
    file.write_all(&json)?;
    fs::rename(&partial, dir.join(name))
}

/// Reads `dir/name` when it is there (and whole): a regular file of at most `MAX_FILE` bytes, not a
/// link.
pub(crate) fn read<T: for<'de> Deserialize<'de>>(dir: &Path, name: &str) -> io::Result<Option<T>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(dir.join(name));
    let file = match opened {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() || metadata.len() > MAX_FILE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name} is not a file of at most {MAX_FILE} bytes"),
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE).read_to_end(&mut bytes)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}

/// Copies a step's output (a file or a tree) to `into/<its name>`, readable by the pusher whatever
/// its user (modes gain read, and search on directories, for all). Links stay links; an output that
/// is itself a link is refused, as following it could leak its target. Returns the copy's path.
pub(crate) fn stage(output: &Path, into: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let own = fs::symlink_metadata(output)?;
    if own.file_type().is_symlink() {
        let target = fs::read_link(output).unwrap_or_default();
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link (to {}); ocifit pushes no link's target: name the file or directory itself",
                output.display(),
                target.display()
            ),
        ));
    }
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
    if own.is_file() {
        fs::copy(output, &staged)?;
        readable(&staged, 0o444)?;
        return Ok(staged);
    }
    for entry in walkdir::WalkDir::new(output)
        .follow_links(false)
        .follow_root_links(false)
    {
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

/// Stages each entry of `dir` (a step's working directory, pushed whole as the oras-operator does)
/// as [`stage`] does; returns the names of the links left out. `/` is refused: it would push the
/// container's whole file system.
pub(crate) fn stage_entries(dir: &Path, into: &Path) -> io::Result<Vec<String>> {
    if fs::canonicalize(dir)? == Path::new("/") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the working directory is /, which ocifit does not push whole: set output-path to what the step writes (or set the container's workingDir)",
        ));
    }
    fs::create_dir_all(into)?;
    let mut links = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_symlink() {
            links.push(entry.file_name().to_string_lossy().into_owned());
            continue;
        }
        stage(&entry.path(), into)?;
    }
    links.sort();
    Ok(links)
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
        assert_eq!(request.outputs(), "outputs-7-1");
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

    #[test]
    fn a_request_names_nothing_but_its_id_and_the_id_must_be_plain() {
        // What an older launcher (or a step's code) adds is ignored: the pusher derives the rest.
        let forged: Request =
            serde_json::from_str(r#"{"id":"1-2","outputs":"/proc/self"}"#).unwrap();
        assert_eq!(forged.outputs(), "outputs-1-2");
        assert_eq!(forged.checked_id(), Ok("1-2"));
        for id in ["", "../x", "a/b", "x\0", ".", "..", &"9".repeat(65)] {
            let request = Request::new(id.to_string());
            assert!(request.checked_id().is_err(), "{id:?} was accepted");
        }
    }

    #[test]
    fn hand_off_files_are_never_read_or_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, br#"{"id":"planted"}"#).unwrap();
        let run = dir.path().join("run");
        fs::create_dir(&run).unwrap();
        std::os::unix::fs::symlink(&outside, run.join(REQUEST)).unwrap();
        assert!(
            read::<Request>(&run, REQUEST).is_err(),
            "read through a link"
        );

        // A link where the answer's temporary file goes is replaced, not written through.
        std::os::unix::fs::symlink(&outside, run.join(".result-1.partial")).unwrap();
        let outcome = Outcome::Failed {
            message: "x".into(),
        };
        write(&run, "result-1", &outcome).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), br#"{"id":"planted"}"#);
        assert_eq!(read(&run, "result-1").unwrap(), Some(outcome));

        // Valid JSON, so only the bound can refuse it; the same answer at the bound is read.
        let answer = |len: usize| {
            let json = serde_json::to_vec(&Outcome::Failed {
                message: "x".repeat(len),
            })
            .unwrap();
            json.len()
        };
        let overhead = answer(0);
        let big = Outcome::Failed {
            message: "x".repeat(MAX_FILE as usize + 1 - overhead),
        };
        write(&run, "big", &big).unwrap();
        let err = read::<Outcome>(&run, "big").unwrap_err().to_string();
        assert!(
            err.contains("at most 65536 bytes"),
            "no bound on a read: {err}"
        );
        let fits = Outcome::Failed {
            message: "x".repeat(MAX_FILE as usize - overhead),
        };
        write(&run, "fits", &fits).unwrap();
        assert_eq!(read(&run, "fits").unwrap(), Some(fits));
    }
}
