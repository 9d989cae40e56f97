//! File operations beneath a directory handle that never follow a symbolic link: each component
//! of a relative path is opened with `O_NOFOLLOW` from the handle of the one before, so a link that
//! someone (an earlier archive entry, a step's code) put anywhere on the way is refused instead of
//! leading outside. What the pusher reads and what an unpack writes go through here.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Flags every open here uses: no link followed, no terminal taken over, no blocking on a FIFO
/// (whose type is then refused by the caller), closed on exec.
const BASE: OFlags = OFlags::NOFOLLOW
    .union(OFlags::NOCTTY)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);

/// Why a path beneath a handle cannot be opened.
#[derive(Debug, thiserror::Error)]
pub(super) enum BeneathError {
    #[error("{0} is a symbolic link, which is never followed")]
    Symlink(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Opens the directory `path` itself (following what leads to it: it is the caller's), refusing
/// a symbolic link at its end.
pub(super) fn open_dir(path: &Path) -> Result<OwnedFd, BeneathError> {
    open_dir_at(
        rustix::fs::CWD,
        path.as_os_str(),
        &path.display().to_string(),
    )
}

/// Opens the directory `name` in `dir`, refusing a symbolic link.
pub(super) fn open_dir_at(
    dir: impl AsFd,
    name: &OsStr,
    shown: &str,
) -> Result<OwnedFd, BeneathError> {
    match rustix::fs::openat(
        dir.as_fd(),
        name,
        BASE | OFlags::RDONLY | OFlags::DIRECTORY,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(fd),
        Err(err) => Err(refusal(dir, name, shown, err)),
    }
}

/// Opens `name` in `dir` for reading, refusing a symbolic link; the caller checks its type on
/// the handle (an open never blocks, even on a FIFO).
pub(super) fn open_at(dir: impl AsFd, name: &OsStr, shown: &str) -> Result<File, BeneathError> {
    match rustix::fs::openat(dir.as_fd(), name, BASE | OFlags::RDONLY, Mode::empty()) {
        Ok(fd) => Ok(File::from(fd)),
        Err(err) => Err(refusal(dir, name, shown, err)),
    }
}

/// The handle of the directory that holds `relative` (a path of normal components, as archive
/// entries are after their checks) and its last component. With `create`, missing directories
/// on the way are made (mode 0755). An empty path has no parent: `None`.
pub(super) fn parent(
    root: impl AsFd,
    relative: &Path,
    create: bool,
) -> Result<Option<(OwnedFd, OsString)>, BeneathError> {
    let names: Vec<&OsStr> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let Some((last, ancestors)) = names.split_last() else {
        return Ok(None);
    };
    let mut at = rustix::io::dup(root.as_fd()).map_err(io::Error::from)?;
    let mut shown = std::path::PathBuf::new();
    for name in ancestors {
        shown.push(name);
        let display = shown.display().to_string();
        at = match open_dir_at(&at, name, &display) {
            Err(BeneathError::Io(err)) if create && err.kind() == io::ErrorKind::NotFound => {
                rustix::fs::mkdirat(&at, *name, Mode::from_raw_mode(0o755))
                    .map_err(io::Error::from)?;
                open_dir_at(&at, name, &display)?
            }
            opened => opened?,
        };
    }
    Ok(Some((at, last.to_os_string())))
}

/// The type of `name` in `dir`, the link itself for a link; `None` when there is nothing.
pub(super) fn kind_at(dir: impl AsFd, name: &OsStr) -> io::Result<Option<FileType>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
        Err(Errno::NOENT) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Removes `name` from `dir`, a directory with everything in it, never following a link.
pub(super) fn remove_at(dir: impl AsFd, name: &OsStr) -> io::Result<()> {
    let dir = dir.as_fd();
    if kind_at(dir, name)? != Some(FileType::Directory) {
        return rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(io::Error::from);
    }
    let inner = open_dir_at(dir, name, &name.to_string_lossy()).map_err(|err| match err {
        BeneathError::Io(err) => err,
        other => io::Error::other(other),
    })?;
    for entry_name in names(&inner)? {
        remove_at(&inner, &entry_name)?;
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR).map_err(io::Error::from)
}

/// The names in a directory, sorted, without `.` and `..`.
pub(super) fn names(dir: impl AsFd) -> io::Result<Vec<OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let mut found = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            found.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    found.sort();
    Ok(found)
}

/// An open that failed: a link gets its own refusal (`O_NOFOLLOW` says `ELOOP`, `O_DIRECTORY`
/// on a link `ENOTDIR`), anything else is the I/O error.
fn refusal(dir: impl AsFd, name: &OsStr, shown: &str, err: Errno) -> BeneathError {
    let is_link = matches!(err, Errno::LOOP | Errno::NOTDIR)
        && kind_at(dir, name).ok().flatten() == Some(FileType::Symlink);
    if is_link {
        BeneathError::Symlink(shown.to_string())
    } else {
        BeneathError::Io(err.into())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_link_anywhere_on_the_way_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(root.join("real")).unwrap();
        let outside = dir.path().join("outside");
        fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("away")).unwrap();
        let root_fd = open_dir(&root).unwrap();

        let err = parent(&root_fd, Path::new("away/new/file"), true).unwrap_err();
        assert!(
            matches!(&err, BeneathError::Symlink(s) if s == "away"),
            "{err}"
        );
        assert!(!outside.join("new").exists(), "nothing created through it");
        let err = open_dir_at(&root_fd, OsStr::new("away"), "away").unwrap_err();
        assert!(matches!(err, BeneathError::Symlink(_)), "{err}");
        let err = open_at(&root_fd, OsStr::new("away"), "away").unwrap_err();
        assert!(matches!(err, BeneathError::Symlink(_)), "{err}");
        assert!(matches!(
            open_dir(&root.join("away")),
            Err(BeneathError::Symlink(_))
        ));

        let (_, last) = parent(&root_fd, Path::new("real/a/b"), true)
            .unwrap()
            .unwrap();
        assert_eq!(last, "b");
        assert!(root.join("real/a").is_dir());
    }

    #[test]
    fn removing_a_tree_removes_links_not_what_they_name() {
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("keep");
        fs::create_dir(&keep).unwrap();
        fs::write(keep.join("precious"), b"x").unwrap();
        let tree = dir.path().join("tree");
        fs::create_dir_all(tree.join("sub")).unwrap();
        std::os::unix::fs::symlink(&keep, tree.join("sub/link")).unwrap();
        let top = open_dir(dir.path()).unwrap();
        remove_at(&top, OsStr::new("tree")).unwrap();
        assert!(!tree.exists());
        assert!(keep.join("precious").exists());
    }
}
