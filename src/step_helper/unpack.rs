//! A tar stream unpacked into a directory, as the ORAS clients write them (see `archive`): never
//! outside its root, nothing made, timed or chmodded through a symbolic link, a hard link only to
//! a file unpacked before it; every entry, and every file's size, taken from the pull's budget
//! before it is written. Blocking code, run on a blocking thread by the transfers.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use tar::EntryType;

use super::Budget;
use super::beneath::{self, BeneathError};
use super::layout::safe_relative;
use super::{FileError, file_error};

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

/// Unpacks a tar stream into the empty directory `root`: entries under `prefix` (the layer's title;
/// empty for `.`), without it. Read to its end so a digest covers every byte; entries are made from
/// `O_NOFOLLOW` directory handles, so no link is followed; `budget` stops it before a write.
pub(super) fn unpack(
    input: impl Read,
    prefix: &Path,
    root: &Path,
    budget: &Budget,
) -> Result<UnpackCount, ArchiveError> {
    let mut unpacker = Unpacker {
        root_fd: beneath::open_dir(root).map_err(|err| beneath_error("open", root, err))?,
        root,
        prefix,
        budget,
        count: UnpackCount::default(),
        directory_modes: BTreeMap::new(),
        buffer: vec![0u8; COPY_BUFFER],
    };
    let mut archive = tar::Archive::new(input);
    for entry in archive.entries().map_err(ArchiveError::Read)? {
        unpacker.entry(&mut entry.map_err(ArchiveError::Read)?)?;
    }
    // Read the end-of-archive padding too, so a digest over the stream covers every byte.
    io::copy(&mut archive.into_inner(), &mut io::sink()).map_err(ArchiveError::Read)?;
    unpacker.set_directory_modes()?;
    Ok(unpacker.count)
}

/// The buffer file contents are copied through: large files take few system calls.
const COPY_BUFFER: usize = 256 * 1024;

/// One unpack under way: the root's handle, what was written, and the directories' modes.
struct Unpacker<'a> {
    root_fd: OwnedFd,
    root: &'a Path,
    prefix: &'a Path,
    budget: &'a Budget,
    count: UnpackCount,
    /// Relative paths of the directories made, with their modes, applied last.
    directory_modes: BTreeMap<PathBuf, u32>,
    buffer: Vec<u8>,
}

/// Where one entry goes: the handle of its directory, its name there, and its paths.
struct Place {
    dir: OwnedFd,
    file_name: OsString,
    relative: PathBuf,
    target: PathBuf,
}

/// Why an entry named `name` is refused.
fn unsafe_entry(name: &str, why: &str) -> ArchiveError {
    ArchiveError::UnsafeEntry {
        name: name.to_string(),
        why: why.to_string(),
    }
}

/// A system call's failure on `target`, as the unpack reports it.
fn failed<'a>(
    action: &'static str,
    target: &'a Path,
) -> impl FnOnce(rustix::io::Errno) -> ArchiveError + 'a {
    move |err| {
        FileError {
            action,
            path: target.to_path_buf(),
            source: err.into(),
        }
        .into()
    }
}

impl Unpacker<'_> {
    /// Writes one entry, or skips it if it is neither file, directory nor link.
    fn entry(&mut self, entry: &mut tar::Entry<'_, impl Read>) -> Result<(), ArchiveError> {
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let kind = entry.header().entry_type();
        let content = match kind {
            EntryType::Regular | EntryType::Continuous => entry.size(),
            _ => 0,
        };
        self.budget.take(content)?;
        let Some(place) = self.place(&name)? else {
            return self.layer_directory(&name, kind, mode);
        };
        match kind {
            EntryType::Directory => self.directory(place, mode),
            EntryType::Regular | EntryType::Continuous => self.file(entry, place, mode),
            EntryType::Symlink => {
                let link = link_name(entry, &name)?;
                self.replace(&place)?;
                rustix::fs::symlinkat(&*link, &place.dir, &place.file_name)
                    .map_err(failed("link", &place.target))?;
                self.count.links += 1;
                Ok(())
            }
            EntryType::Link => {
                let link = link_name(entry, &name)?;
                self.hard_link(&name, &link, place)
            }
            _ => {
                tracing::warn!(entry = %name, kind = ?kind, "skipping an archive entry that is not a file, directory or link");
                self.count.skipped += 1;
                Ok(())
            }
        }
    }

    /// Opens the directory an entry goes in, without following a link; `None` for the layer's
    /// directory itself.
    fn place(&self, name: &str) -> Result<Option<Place>, ArchiveError> {
        let path = safe_relative(name).map_err(|why| unsafe_entry(name, why))?;
        let Ok(relative) = path.strip_prefix(self.prefix) else {
            let why = format!("is not under the layer's title {:?}", self.prefix.display());
            return Err(unsafe_entry(name, &why));
        };
        let relative = relative.to_path_buf();
        let target = self.root.join(&relative);
        let at = beneath::parent(&self.root_fd, &relative, true).map_err(|err| match err {
            BeneathError::Symlink(_) => {
                unsafe_entry(name, "would be written through a symbolic link")
            }
            BeneathError::Io(source) => FileError {
                action: "create",
                path: target.clone(),
                source,
            }
            .into(),
        })?;
        Ok(at.map(|(dir, file_name)| Place {
            dir,
            file_name,
            relative,
            target,
        }))
    }

    /// An entry naming the layer's directory: only a directory may, and gives the root its mode.
    fn layer_directory(
        &mut self,
        name: &str,
        kind: EntryType,
        mode: u32,
    ) -> Result<(), ArchiveError> {
        match kind {
            EntryType::Directory => {
                self.directory_modes.insert(PathBuf::new(), mode);
                Ok(())
            }
            EntryType::Regular | EntryType::Continuous => Err(unsafe_entry(
                name,
                "is a file where the layer's directory should be",
            )),
            _ => Err(unsafe_entry(
                name,
                "is not a directory, but names the layer's directory",
            )),
        }
    }

    /// Makes a directory (kept if one is there), its mode recorded for the end.
    fn directory(&mut self, place: Place, mode: u32) -> Result<(), ArchiveError> {
        let there = beneath::kind_at(&place.dir, &place.file_name)
            .map_err(file_error("read", &place.target))?;
        if there != Some(FileType::Directory) {
            self.replace(&place)?;
            rustix::fs::mkdirat(&place.dir, &place.file_name, Mode::from_raw_mode(0o700))
                .map_err(failed("create", &place.target))?;
        }
        self.directory_modes.insert(place.relative, mode);
        self.count.directories += 1;
        Ok(())
    }

    /// Writes a file new (`O_EXCL | O_NOFOLLOW`), its content, mode and modification time.
    fn file(
        &mut self,
        entry: &mut tar::Entry<'_, impl Read>,
        place: Place,
        mode: u32,
    ) -> Result<(), ArchiveError> {
        self.replace(&place)?;
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(
            &place.dir,
            &place.file_name,
            flags,
            Mode::from_raw_mode(mode | 0o200),
        )
        .map_err(failed("create", &place.target))?;
        let mut file = File::from(fd);
        self.count.bytes += copy(entry, &mut file, &place.target, &mut self.buffer)?;
        self.count.files += 1;
        if mode & 0o200 == 0 {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))
                .map_err(failed("set the mode of", &place.target))?;
        }
        set_mtime(&file, entry.header().mtime().ok());
        Ok(())
    }

    /// Links a name to a file unpacked before it in this layer, never through a symbolic link.
    fn hard_link(&mut self, name: &str, link: &Path, place: Place) -> Result<(), ArchiveError> {
        let link = safe_relative(&link.to_string_lossy())
            .map_err(|why| unsafe_entry(name, &format!("links to a path {why}")))?;
        let source = link
            .strip_prefix(self.prefix)
            .map_err(|_| unsafe_entry(name, "links outside the layer"))?;
        let not_a_file = || {
            unsafe_entry(
                name,
                "links to something that is not a file unpacked before it",
            )
        };
        let (source_dir, source_name) = match beneath::parent(&self.root_fd, source, false) {
            Ok(Some(found)) => found,
            Ok(None) | Err(BeneathError::Io(_)) => return Err(not_a_file()),
            Err(BeneathError::Symlink(_)) => {
                return Err(unsafe_entry(name, "would be read through a symbolic link"));
            }
        };
        let is_file = beneath::kind_at(&source_dir, &source_name)
            .is_ok_and(|k| k == Some(FileType::RegularFile));
        if !is_file {
            return Err(not_a_file());
        }
        self.replace(&place)?;
        // Without AT_SYMLINK_FOLLOW: the name itself is linked, never what it points at.
        rustix::fs::linkat(
            &source_dir,
            &source_name,
            &place.dir,
            &place.file_name,
            AtFlags::empty(),
        )
        .map_err(failed("link", &place.target))?;
        self.count.links += 1;
        Ok(())
    }

    /// Directory modes last, deepest first, so a read-only directory did not block its content;
    /// each directory is opened again from the root without following a link.
    fn set_directory_modes(&self) -> Result<(), ArchiveError> {
        for (relative, mode) in self.directory_modes.iter().rev() {
            let target = self.root.join(relative);
            let handle = match beneath::parent(&self.root_fd, relative, false)
                .map_err(|err| beneath_error("set the mode of", &target, err))?
            {
                None => {
                    rustix::io::dup(&self.root_fd).map_err(failed("set the mode of", &target))?
                }
                Some((dir, name)) => {
                    beneath::open_dir_at(&dir, &name, &target.display().to_string())
                        .map_err(|err| beneath_error("set the mode of", &target, err))?
                }
            };
            rustix::fs::fchmod(&handle, Mode::from_raw_mode(*mode | 0o700))
                .map_err(failed("set the mode of", &target))?;
        }
        Ok(())
    }

    /// Removes what an earlier entry of the same name left (later entries win, as in tar), never
    /// following a link; a directory removed takes its recorded modes with it.
    fn replace(&mut self, place: &Place) -> Result<(), ArchiveError> {
        let there = beneath::kind_at(&place.dir, &place.file_name)
            .map_err(file_error("read", &place.target))?;
        if there.is_none() {
            return Ok(());
        }
        beneath::remove_at(&place.dir, &place.file_name)
            .map_err(file_error("replace", &place.target))?;
        self.directory_modes
            .retain(|made, _| !made.starts_with(&place.relative));
        Ok(())
    }
}

/// The target a link entry names; a link without one is refused.
fn link_name(entry: &tar::Entry<'_, impl Read>, name: &str) -> Result<PathBuf, ArchiveError> {
    entry
        .link_name()
        .map_err(ArchiveError::Read)?
        .map(|link| link.into_owned())
        .ok_or_else(|| unsafe_entry(name, "is a link without a target"))
}

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
            .map_err(file_error("write", target))?;
        written += n as u64;
    }
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
