//! A tar stream unpacked into a directory, as the ORAS clients write them (see `archive`): never
//! outside its root, nothing made, timed or chmodded through a symbolic link, a hard link only to
//! a file unpacked before it. Blocking code, run on a blocking thread by the transfers.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use tar::EntryType;

use super::beneath::{self, BeneathError};
use super::file_error::{self, FileError};
use super::layout::safe_relative;

use super::archive::{ArchiveError, beneath_error};

/// What an unpack wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnpackCount {
    pub files: u64,
    pub directories: u64,
    pub links: u64,
    /// Entries of other types (devices, FIFOs), not created.
    pub skipped: u64,
    /// Bytes of file content written.
    pub bytes: u64,
}

/// Unpacks a tar stream into `root` (an existing, empty directory), taking only entries named
/// under `prefix` (the layer's title; empty for `.`) and writing them without it. The stream is
/// read to its end, so a digest computed over it covers every byte. Every entry is made from the
/// handle of its directory, each opened from `root` with `O_NOFOLLOW`: a link an earlier entry
/// made is never followed, whatever later entries, times or modes name it.
pub fn unpack(input: impl Read, prefix: &Path, root: &Path) -> Result<UnpackCount, ArchiveError> {
    let root_fd = beneath::open_dir(root).map_err(|err| beneath_error("open", root, err))?;
    let mut archive = tar::Archive::new(input);
    let mut count = UnpackCount::default();
    // Relative paths of the directories made, with their modes, applied last.
    let mut directory_modes: BTreeMap<PathBuf, u32> = BTreeMap::new();
    let mut buffer = vec![0u8; COPY_BUFFER];
    let entries = archive.entries().map_err(ArchiveError::Read)?;
    for entry in entries {
        let mut entry = entry.map_err(ArchiveError::Read)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let unsafe_entry = |why: &str| ArchiveError::UnsafeEntry {
            name: name.clone(),
            why: why.to_string(),
        };
        let through_link = |err: BeneathError, target: &Path| match err {
            BeneathError::Symlink(_) => unsafe_entry("would be written through a symbolic link"),
            BeneathError::Io(source) => FileError {
                action: "create",
                path: target.to_path_buf(),
                source,
            }
            .into(),
        };
        let path = safe_relative(&name).map_err(unsafe_entry)?;
        let Ok(relative) = path.strip_prefix(prefix) else {
            return Err(unsafe_entry(&format!(
                "is not under the layer's title {:?}",
                prefix.display()
            )));
        };
        let relative = relative.to_path_buf();
        let target = root.join(&relative);
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let kind = entry.header().entry_type();
        let at =
            beneath::parent(&root_fd, &relative, true).map_err(|err| through_link(err, &target))?;
        let Some((dir, file_name)) = at else {
            // The layer's directory itself.
            match kind {
                EntryType::Directory => {
                    directory_modes.insert(PathBuf::new(), mode);
                    continue;
                }
                EntryType::Regular | EntryType::Continuous => {
                    return Err(unsafe_entry(
                        "is a file where the layer's directory should be",
                    ));
                }
                _ => {
                    return Err(unsafe_entry(
                        "is not a directory, but names the layer's directory",
                    ));
                }
            }
        };
        match kind {
            EntryType::Directory => {
                if beneath::kind_at(&dir, &file_name).map_err(file_error::at("read", &target))?
                    != Some(FileType::Directory)
                {
                    replace(&dir, &file_name, &relative, &target, &mut directory_modes)?;
                    rustix::fs::mkdirat(&dir, &file_name, Mode::from_raw_mode(0o700)).map_err(
                        |err| FileError {
                            action: "create",
                            path: target.clone(),
                            source: err.into(),
                        },
                    )?;
                }
                directory_modes.insert(relative, mode);
                count.directories += 1;
            }
            EntryType::Regular | EntryType::Continuous => {
                replace(&dir, &file_name, &relative, &target, &mut directory_modes)?;
                let fd = rustix::fs::openat(
                    &dir,
                    &file_name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(mode | 0o200),
                )
                .map_err(|err| FileError {
                    action: "create",
                    path: target.clone(),
                    source: err.into(),
                })?;
                let mut file = File::from(fd);
                let written = copy(&mut entry, &mut file, &target, &mut buffer)?;
                count.bytes += written;
                count.files += 1;
                if mode & 0o200 == 0 {
                    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(|err| {
                        FileError {
                            action: "set the mode of",
                            path: target.clone(),
                            source: err.into(),
                        }
                    })?;
                }
                set_mtime(&file, entry.header().mtime().ok());
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(ArchiveError::Read)?
                    .ok_or_else(|| unsafe_entry("is a link without a target"))?;
                replace(&dir, &file_name, &relative, &target, &mut directory_modes)?;
                rustix::fs::symlinkat(&*link, &dir, &file_name).map_err(|err| FileError {
                    action: "link",
                    path: target.clone(),
                    source: err.into(),
                })?;
                count.links += 1;
            }
            EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(ArchiveError::Read)?
                    .ok_or_else(|| unsafe_entry("is a link without a target"))?;
                let link = safe_relative(&link.to_string_lossy())
                    .map_err(|why| unsafe_entry(&format!("links to a path {why}")))?;
                let source = link
                    .strip_prefix(prefix)
                    .map_err(|_| unsafe_entry("links outside the layer"))?;
                let not_a_file =
                    || unsafe_entry("links to something that is not a file unpacked before it");
                let (source_dir, source_name) = match beneath::parent(&root_fd, source, false) {
                    Ok(Some(found)) => found,
                    Ok(None) => return Err(not_a_file()),
                    Err(BeneathError::Symlink(_)) => {
                        return Err(unsafe_entry("would be read through a symbolic link"));
                    }
                    Err(BeneathError::Io(_)) => return Err(not_a_file()),
                };
                let is_file = beneath::kind_at(&source_dir, &source_name)
                    .is_ok_and(|k| k == Some(FileType::RegularFile));
                if !is_file {
                    return Err(not_a_file());
                }
                replace(&dir, &file_name, &relative, &target, &mut directory_modes)?;
                // Without AT_SYMLINK_FOLLOW: the name itself is linked, never what it points at.
                rustix::fs::linkat(
                    &source_dir,
                    &source_name,
                    &dir,
                    &file_name,
                    AtFlags::empty(),
                )
                .map_err(|err| FileError {
                    action: "link",
                    path: target.clone(),
                    source: err.into(),
                })?;
                count.links += 1;
            }
            _ => {
                tracing::warn!(entry = %name, kind = ?kind, "skipping an archive entry that is not a file, directory or link");
                count.skipped += 1;
            }
        }
    }
    // Read the end-of-archive padding too, so a digest over the stream covers every byte.
    io::copy(&mut archive.into_inner(), &mut io::sink()).map_err(ArchiveError::Read)?;
    // Directory modes last, deepest first, so a read-only directory did not block its content;
    // each directory is opened again from the root without following a link.
    for (relative, mode) in directory_modes.iter().rev() {
        let target = root.join(relative);
        let handle = match beneath::parent(&root_fd, relative, false)
            .map_err(|err| beneath_error("set the mode of", &target, err))?
        {
            None => rustix::io::dup(&root_fd).map_err(|err| FileError {
                action: "set the mode of",
                path: target.clone(),
                source: err.into(),
            })?,
            Some((dir, name)) => beneath::open_dir_at(&dir, &name, &target.display().to_string())
                .map_err(|err| beneath_error("set the mode of", &target, err))?,
        };
        rustix::fs::fchmod(&handle, Mode::from_raw_mode(*mode | 0o700)).map_err(|err| {
            FileError {
                action: "set the mode of",
                path: target.clone(),
                source: err.into(),
            }
        })?;
    }
    Ok(count)
}

/// The buffer file contents are copied through: large files take few system calls.
const COPY_BUFFER: usize = 256 * 1024;

/// Copies an entry's content to its file; a read error is the archive's, a write error the file's.
fn copy(
    entry: &mut impl Read,
    file: &mut File,
    target: &Path,
    buffer: &mut [u8],
) -> Result<u64, ArchiveError> {
    let mut written = 0;
    loop {
        let n = entry.read(buffer).map_err(ArchiveError::Read)?;
        if n == 0 {
            return Ok(written);
        }
        file.write_all(&buffer[..n])
            .map_err(file_error::at("write", target))?;
        written += n as u64;
    }
}

/// Removes what an earlier entry of the same name left (later entries win, as in tar), never
/// following a link; a directory removed takes its recorded modes with it.
fn replace(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    relative: &Path,
    target: &Path,
    directory_modes: &mut BTreeMap<PathBuf, u32>,
) -> Result<(), ArchiveError> {
    if beneath::kind_at(dir, name)
        .map_err(file_error::at("read", target))?
        .is_none()
    {
        return Ok(());
    }
    beneath::remove_at(dir, name).map_err(file_error::at("replace", target))?;
    directory_modes.retain(|made, _| !made.starts_with(relative));
    Ok(())
}

fn set_mtime(file: &File, mtime: Option<u64>) {
    if let Some(seconds) = mtime.and_then(|s| i64::try_from(s).ok()) {
        let times = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_OMIT,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: seconds,
                tv_nsec: 0,
            },
        };
        // A file keeps its content without its time; not worth failing a pull over.
        let _ = rustix::fs::futimens(file, &times);
    }
}
