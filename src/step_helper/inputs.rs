//! Several inputs in one place, as the oras-operator puts them: each input is pulled on its own,
//! then merged into one tree, directories of the same name merged (two scattered steps that each
//! pushed `out/` give one `out/`); a file (or link) present in two inputs is the only conflict,
//! an error naming it and both inputs, never a silent overwrite. Then the launcher, in the step's
//! own container, puts that tree where the oras-operator's `cp -R /mnt/oras/inputs/ <input-path>`
//! puts it ([`destination`]) and copies it there as `cp -R` would: directories merged into what
//! the image has there, files put in place, nothing of the image hidden.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{FileError, file_error};

/// Why the inputs could not be put together.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(
        "{path} is in both input {first} and input {second}; inputs are merged into one place, where a file may come from one input only"
    )]
    Conflict {
        path: PathBuf,
        first: String,
        second: String,
    },
    #[error(transparent)]
    Io(#[from] FileError),
}

/// What has been placed in the merged tree so far: each path moved in whole, with the input it
/// came from. A path's input is that of the path itself or of its nearest ancestor moved in whole.
#[derive(Debug, Default)]
pub(super) struct Merged {
    placed: BTreeMap<PathBuf, String>,
}

impl Merged {
    /// Moves everything under `from` (an input pulled on its own, on the same file system) into
    /// `into`, merging directories; `input` names it in a conflict. Nothing is followed through
    /// a symbolic link: a link is an entry like a file.
    pub(super) fn add(&mut self, from: &Path, into: &Path, input: &str) -> Result<(), MergeError> {
        self.merge(from, into, Path::new(""), input)
    }

    fn merge(
        &mut self,
        from: &Path,
        into: &Path,
        relative: &Path,
        input: &str,
    ) -> Result<(), MergeError> {
        let mut entries = fs::read_dir(from)
            .map_err(file_error("read", from))?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect::<io::Result<Vec<_>>>()
            .map_err(file_error("read", from))?;
        entries.sort();
        for name in entries {
            let source = from.join(&name);
            let target = into.join(&name);
            let path = relative.join(&name);
            let source_is_dir = is_real_dir(&source).map_err(file_error("read", &source))?;
            match target.symlink_metadata() {
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    fs::rename(&source, &target).map_err(file_error("move into place", &target))?;
                    self.placed.insert(path, input.to_string());
                }
                Err(err) => return Err(file_error("read", &target)(err).into()),
                Ok(existing) if existing.is_dir() && source_is_dir => {
                    self.merge(&source, &target, &path, input)?;
                }
                Ok(_) => {
                    return Err(MergeError::Conflict {
                        first: self.origin(&path),
                        second: input.to_string(),
                        path,
                    });
                }
            }
        }
        Ok(())
    }

    /// The input a path of the merged tree came from.
    fn origin(&self, path: &Path) -> String {
        path.ancestors()
            .find_map(|a| self.placed.get(a))
            .cloned()
            .unwrap_or_default()
    }
}

/// Whether `path` is a directory itself, not a link to one.
fn is_real_dir(path: &Path) -> io::Result<bool> {
    Ok(path.symlink_metadata()?.is_dir())
}

/// The directory `cp -R` names after its source, the oras-operator's `/mnt/oras/inputs`.
pub const INPUTS_NAME: &str = "inputs";

/// Where GNU `cp -R /mnt/oras/inputs/ <dest>` puts the inputs (the trailing `/` changes nothing):
/// inside `dest` as `inputs/` when `dest` is a directory (or a link to one), as `dest` itself when
/// nothing is there. A file at `dest` is an error, as `cp` cannot put a directory over a file.
pub(super) fn destination(dest: &Path) -> Result<PathBuf, FileError> {
    match fs::metadata(dest) {
        Ok(meta) if meta.is_dir() => Ok(dest.join(INPUTS_NAME)),
        Ok(_) => Err(FileError {
            action: "copy the inputs to",
            path: dest.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a file is there and the inputs are a directory",
            ),
        }),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(dest.to_path_buf()),
        Err(err) => Err(file_error("read", dest)(err)),
    }
}

/// Copies the tree at `from` into `to` as `cp -R from/. to` does: directories merged (created with
/// their modes), files and links replacing a file or link of the same name. A directory where the
/// tree has a file, or the reverse, is an error: copying over it would delete the image's files.
pub(super) fn copy_into(from: &Path, to: &Path) -> Result<(), FileError> {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir_all(to).map_err(file_error("create", to))?;
    for entry in walkdir::WalkDir::new(from)
        .min_depth(1)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|err| {
            let path = err.path().unwrap_or(from).to_path_buf();
            FileError {
                action: "read",
                path,
                source: io::Error::from(err),
            }
        })?;
        let relative = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let target = to.join(relative);
        let kind = entry.file_type();
        let existing = target.symlink_metadata().ok();
        let in_the_way = |what: &str| FileError {
            action: "copy the inputs to",
            path: target.clone(),
            source: io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("the image has {what} there"),
            ),
        };
        if kind.is_dir() {
            match existing {
                Some(meta) if meta.is_dir() => {}
                Some(_) => return Err(in_the_way("a file where an input has a directory")),
                None => {
                    fs::create_dir(&target).map_err(file_error("create", &target))?;
                    let mode = entry
                        .metadata()
                        .map_err(|err| file_error("read", entry.path())(err.into()))?
                        .permissions()
                        .mode();
                    fs::set_permissions(&target, fs::Permissions::from_mode(mode & 0o7777))
                        .map_err(file_error("set the mode of", &target))?;
                }
            }
            continue;
        }
        if existing.as_ref().is_some_and(fs::Metadata::is_dir) {
            return Err(in_the_way("a directory where an input has a file"));
        }
        if kind.is_symlink() {
            if existing.is_some() {
                fs::remove_file(&target).map_err(file_error("replace", &target))?;
            }
            let link = fs::read_link(entry.path()).map_err(file_error("read", entry.path()))?;
            std::os::unix::fs::symlink(link, &target).map_err(file_error("link", &target))?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).map_err(file_error("copy to", &target))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn tree(root: &Path, files: &[(&str, &str)]) {
        for (path, content) in files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
    }

    fn read(root: &Path, path: &str) -> String {
        fs::read_to_string(root.join(path)).unwrap()
    }

    #[test]
    fn two_inputs_that_each_hold_out_land_merged_in_one_out() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two, into) = (
            dir.path().join("1"),
            dir.path().join("2"),
            dir.path().join("in"),
        );
        tree(
            &one,
            &[
                ("out/a.txt", "a"),
                ("out/deep/x.txt", "x"),
                ("one.txt", "1"),
            ],
        );
        tree(&two, &[("out/b.txt", "b"), ("out/deep/y.txt", "y")]);
        fs::create_dir(&into).unwrap();
        let mut merged = Merged::default();
        merged.add(&one, &into, "w/one:v1").unwrap();
        merged.add(&two, &into, "w/two:v1").unwrap();
        for (path, content) in [
            ("out/a.txt", "a"),
            ("out/b.txt", "b"),
            ("out/deep/x.txt", "x"),
            ("out/deep/y.txt", "y"),
            ("one.txt", "1"),
        ] {
            assert_eq!(read(&into, path), content, "{path}");
        }
    }

    #[test]
    fn a_file_in_two_inputs_is_the_conflict_named_with_both_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two, into) = (
            dir.path().join("1"),
            dir.path().join("2"),
            dir.path().join("in"),
        );
        tree(&one, &[("out/deep/same.txt", "first")]);
        tree(
            &two,
            &[("out/other.txt", "o"), ("out/deep/same.txt", "second")],
        );
        fs::create_dir(&into).unwrap();
        let mut merged = Merged::default();
        merged.add(&one, &into, "w/one:v1").unwrap();
        let err = merged.add(&two, &into, "w/two:v1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "out/deep/same.txt is in both input w/one:v1 and input w/two:v1; inputs are merged into one place, where a file may come from one input only"
        );
        assert_eq!(
            read(&into, "out/deep/same.txt"),
            "first",
            "never overwritten"
        );
    }

    #[test]
    fn a_directory_in_one_input_and_a_file_in_another_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two, into) = (
            dir.path().join("1"),
            dir.path().join("2"),
            dir.path().join("in"),
        );
        tree(&one, &[("out", "a file")]);
        tree(&two, &[("out/b.txt", "b")]);
        fs::create_dir(&into).unwrap();
        let mut merged = Merged::default();
        merged.add(&one, &into, "w/one:v1").unwrap();
        let err = merged.add(&two, &into, "w/two:v1").unwrap_err().to_string();
        assert!(
            err.starts_with("out is in both input w/one:v1 and input w/two:v1"),
            "{err}"
        );
    }

    #[test]
    fn a_link_is_never_merged_through() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two, into) = (
            dir.path().join("1"),
            dir.path().join("2"),
            dir.path().join("in"),
        );
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        fs::create_dir_all(&one).unwrap();
        std::os::unix::fs::symlink(&elsewhere, one.join("out")).unwrap();
        tree(&two, &[("out/b.txt", "b")]);
        fs::create_dir(&into).unwrap();
        let mut merged = Merged::default();
        merged.add(&one, &into, "w/one:v1").unwrap();
        assert!(merged.add(&two, &into, "w/two:v1").is_err());
        assert!(!elsewhere.join("b.txt").exists());
    }

    #[test]
    fn inputs_are_copied_into_the_working_directory_beside_the_images_files() {
        let dir = tempfile::tempdir().unwrap();
        let (inputs, work) = (dir.path().join("inputs"), dir.path().join("work"));
        tree(&inputs, &[("out/a.txt", "from input"), ("data.txt", "new")]);
        std::os::unix::fs::symlink("a.txt", inputs.join("out/link")).unwrap();
        tree(
            &work,
            &[
                ("out/image.txt", "the image's"),
                ("data.txt", "old"),
                ("app", "x"),
            ],
        );
        copy_into(&inputs, &work).unwrap();
        assert_eq!(read(&work, "out/a.txt"), "from input");
        assert_eq!(read(&work, "out/image.txt"), "the image's", "not hidden");
        assert_eq!(read(&work, "app"), "x");
        assert_eq!(
            read(&work, "data.txt"),
            "new",
            "as cp -R puts a file in place"
        );
        assert_eq!(
            fs::read_link(work.join("out/link")).unwrap(),
            Path::new("a.txt")
        );
        // Again (a restarted step): the same result.
        copy_into(&inputs, &work).unwrap();
        assert_eq!(read(&work, "out/link"), "from input");
    }

    #[test]
    fn an_existing_directory_gets_the_inputs_as_an_inputs_directory_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        fs::create_dir(&work).unwrap();
        assert_eq!(destination(&work).unwrap(), work.join("inputs"));
        // `.` (no input-path: the working directory) is a directory too.
        assert_eq!(
            destination(&work.join(".")).unwrap(),
            work.join(".").join("inputs")
        );
    }

    #[test]
    fn a_link_to_a_directory_is_followed_as_cp_follows_its_destination() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        fs::create_dir(&data).unwrap();
        std::os::unix::fs::symlink(&data, dir.path().join("link")).unwrap();
        assert_eq!(
            destination(&dir.path().join("link")).unwrap(),
            dir.path().join("link/inputs")
        );
    }

    #[test]
    fn a_path_that_does_not_exist_becomes_the_inputs_themselves() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("data");
        assert_eq!(destination(&missing).unwrap(), missing);
    }

    #[test]
    fn a_file_where_the_inputs_would_go_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        fs::write(&file, "x").unwrap();
        let err = destination(&file).unwrap_err();
        assert_eq!(err.path, file);
        assert!(
            err.source.to_string().contains("a file is there"),
            "{}",
            err.source
        );
    }

    #[test]
    fn a_copy_that_would_replace_a_directory_with_a_file_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let (inputs, work) = (dir.path().join("inputs"), dir.path().join("work"));
        tree(&inputs, &[("out", "a file")]);
        tree(&work, &[("out/kept.txt", "k")]);
        let err = copy_into(&inputs, &work).unwrap_err();
        assert_eq!(err.path, work.join("out"));
        assert!(
            err.source
                .to_string()
                .contains("a directory where an input has a file")
        );
        assert_eq!(read(&work, "out/kept.txt"), "k");
    }
}
