//! Directories as tar streams, both ways, as the ORAS clients write and read them: entries named
//! under the layer's title, owners zeroed, symbolic links kept as links (never followed), hard
//! links stored as files. Unpacking (in `unpack`) never writes outside its root: names with `..`
//! or a root are refused, every entry is made from directory handles opened with `O_NOFOLLOW`,
//! and a hard link may only name a file unpacked before it. Blocking code, run on a blocking
//! thread by the transfers; packing and unpacking share [`ArchiveError`].

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rustix::fs::FileType;
use tar::{EntryType, Header};

use super::beneath::{self, BeneathError};
use super::{FileError, file_error};

/// Why a directory could not be packed or an archive unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("failed to read the archive")]
    Read(#[source] io::Error),
    #[error("archive entry {name:?} {why}")]
    UnsafeEntry { name: String, why: String },
    #[error(
        "{path} is a symbolic link; ocifit never follows one: name the file or directory itself"
    )]
    Symlink { path: PathBuf },
    #[error("the uncompressed archive's digest is {actual}, the artifact says {expected}")]
    TarDigest { expected: String, actual: String },
    #[error(transparent)]
    Limit(#[from] super::Exceeded),
}

/// What a pack wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PackCount {
    pub files: u64,
    pub directories: u64,
    pub links: u64,
    /// Sockets, FIFOs and devices, which an artifact cannot carry.
    pub skipped: u64,
}

/// Writes the open directory `dir` (`shown` in errors) as a tar stream of entries under `prefix`,
/// in name order so one tree gives one archive. Entries are opened with `O_NOFOLLOW` from their
/// directory's handle, so links go in as links and a name swapped for one is refused.
pub(super) fn pack_dir(
    dir: OwnedFd,
    shown: &str,
    prefix: &str,
    out: impl Write,
) -> Result<PackCount, ArchiveError> {
    let mut builder = tar::Builder::new(out);
    let mut count = PackCount::default();
    let root = File::from(dir);
    let metadata = root
        .metadata()
        .map_err(file_error("read", Path::new(shown)))?;
    let mut header = header_for(&metadata);
    header.set_entry_type(EntryType::Directory);
    header.set_size(0);
    builder
        .append_data(&mut header, Path::new(prefix).join(""), io::empty())
        .map_err(file_error("write the archive entry for", Path::new(shown)))?;
    count.directories += 1;
    // Depth first, each directory's names in order, as `find | sort` lists a tree.
    let mut pending = Vec::new();
    let root = Rc::new(OwnedFd::from(root));
    push_children(&mut pending, &root, Path::new(""), shown)?;
    while let Some((parent, relative)) = pending.pop() {
        let name = Path::new(prefix).join(&relative);
        let path = Path::new(shown).join(&relative);
        let file_name = relative.file_name().unwrap_or_default();
        let kind = beneath::kind_at(&*parent, file_name)
            .map_err(file_error("read", &path))?
            .ok_or_else(|| {
                ArchiveError::Io(FileError {
                    action: "read",
                    path: path.clone(),
                    source: io::ErrorKind::NotFound.into(),
                })
            })?;
        match kind {
            FileType::Symlink => {
                append_link_at(&mut builder, &parent, file_name, &name, &path)?;
                count.links += 1;
            }
            FileType::Directory => {
                let handle = beneath::open_dir_at(&*parent, file_name, &path.display().to_string())
                    .map_err(|err| beneath_error("open", &path, err))?;
                let handle = File::from(handle);
                let metadata = handle.metadata().map_err(file_error("read", &path))?;
                let mut header = header_for(&metadata);
                header.set_entry_type(EntryType::Directory);
                header.set_size(0);
                builder
                    .append_data(&mut header, &name, io::empty())
                    .map_err(file_error("write the archive entry for", &path))?;
                count.directories += 1;
                push_children(
                    &mut pending,
                    &Rc::new(OwnedFd::from(handle)),
                    &relative,
                    shown,
                )?;
            }
            FileType::RegularFile => {
                append_file_at(&mut builder, &parent, file_name, &name, &path)?;
                count.files += 1;
            }
            _ => {
                tracing::warn!(path = %path.display(), "skipping a socket, FIFO or device: an artifact carries files, directories and links only");
                count.skipped += 1;
            }
        }
    }
    builder
        .into_inner()
        .and_then(|mut out| out.flush())
        .map_err(file_error("finish the archive of", Path::new(shown)))?;
    Ok(count)
}

/// Archives the link `file_name` of `parent` as `name`: its target text only, never followed.
fn append_link_at<W: Write>(
    builder: &mut tar::Builder<W>,
    parent: &OwnedFd,
    file_name: &std::ffi::OsStr,
    name: &Path,
    path: &Path,
) -> Result<(), ArchiveError> {
    let target =
        rustix::fs::readlinkat(parent, file_name, Vec::new()).map_err(|err| FileError {
            action: "read the link",
            path: path.to_path_buf(),
            source: err.into(),
        })?;
    let target = PathBuf::from(std::ffi::OsString::from_vec(target.into_bytes()));
    let mut header = Header::new_gnu();
    header.set_mode(0o777);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(EntryType::Symlink);
    header.set_size(0);
    builder
        .append_link(&mut header, name, &target)
        .map_err(file_error("archive the link", path))?;
    Ok(())
}

/// Archives the regular file `file_name` of `parent` as `name`, opened beneath it.
fn append_file_at<W: Write>(
    builder: &mut tar::Builder<W>,
    parent: &OwnedFd,
    file_name: &std::ffi::OsStr,
    name: &Path,
    path: &Path,
) -> Result<(), ArchiveError> {
    let file = beneath::open_at(parent, file_name, &path.display().to_string())
        .map_err(|err| beneath_error("open", path, err))?;
    let metadata = file.metadata().map_err(file_error("read", path))?;
    if !metadata.is_file() {
        return Err(FileError {
            action: "archive",
            path: path.to_path_buf(),
            source: io::Error::other("it stopped being a file while it was read"),
        }
        .into());
    }
    let mut header = header_for(&metadata);
    header.set_entry_type(EntryType::Regular);
    header.set_size(metadata.len());
    // A file that changes size while it is read would corrupt the archive: `take` stops at the
    // size written in the header, and a short read fails below.
    let mut limited = file.take(metadata.len());
    builder
        .append_data(&mut header, name, &mut limited)
        .map_err(file_error("archive", path))?;
    Ok(())
}

/// A directory's entries, to be taken in name order from the end of `pending`.
fn push_children(
    pending: &mut Vec<(Rc<OwnedFd>, PathBuf)>,
    dir: &Rc<OwnedFd>,
    relative: &Path,
    shown: &str,
) -> Result<(), ArchiveError> {
    let names =
        beneath::names(&**dir).map_err(file_error("read", &Path::new(shown).join(relative)))?;
    for name in names.into_iter().rev() {
        pending.push((Rc::clone(dir), relative.join(name)));
    }
    Ok(())
}

/// A header with the mode and time of `metadata`, owners zeroed.
fn header_for(metadata: &fs::Metadata) -> Header {
    let mut header = Header::new_gnu();
    header.set_mode(metadata.permissions().mode() & 0o7777);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(
        metadata
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs()),
    );
    header
}

pub(super) fn beneath_error(action: &'static str, path: &Path, err: BeneathError) -> ArchiveError {
    match err {
        BeneathError::Io(source) => FileError {
            action,
            path: path.to_path_buf(),
            source,
        }
        .into(),
        BeneathError::Symlink(_) => ArchiveError::Symlink {
            path: path.to_path_buf(),
        },
    }
}

#[cfg(test)]
mod tests;
