//! Directories as tar streams, both ways, as the ORAS clients write and read them: every entry
//! named under the layer's title (`out/`, `out/a.txt`, …), owners zeroed, symbolic links kept as
//! links, hard-linked files stored as files. Unpacking never writes outside its root: entry names
//! with `..` or a root are refused, nothing is written through a symbolic link (ancestors are
//! checked, files are created new), and a hard link may only name a file unpacked before it.
//! Blocking code, run on a blocking thread by the transfers.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use filetime::FileTime;
use tar::{EntryType, Header};

use super::file_error::{self, FileError};
use super::layout::safe_relative;

/// Why a directory could not be packed or an archive unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("the archive is unreadable")]
    Read(#[source] io::Error),
    #[error("archive entry {name:?} {why}")]
    UnsafeEntry { name: String, why: String },
    #[error("the uncompressed archive's digest is {actual}, the artifact says {expected}")]
    TarDigest { expected: String, actual: String },
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

/// Writes `dir` as a tar stream whose entries are named under `prefix`, in name order so the same
/// tree gives the same archive. File contents are streamed; nothing is held whole.
pub fn pack(dir: &Path, prefix: &str, out: impl Write) -> Result<PackCount, ArchiveError> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let mut count = PackCount::default();
    for entry in walkdir::WalkDir::new(dir)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|err| {
            let path = err.path().unwrap_or(dir).to_path_buf();
            FileError {
                action: "read",
                path,
                source: err.into(),
            }
        })?;
        let relative = entry.path().strip_prefix(dir).unwrap_or(Path::new(""));
        let name = Path::new(prefix).join(relative);
        let metadata = entry
            .path()
            .symlink_metadata()
            .map_err(file_error::at("read", entry.path()))?;
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
        let file_type = metadata.file_type();
        if file_type.is_dir() {
            header.set_entry_type(EntryType::Directory);
            header.set_size(0);
            builder
                .append_data(&mut header, &name, io::empty())
                .map_err(file_error::at("write the archive entry for", entry.path()))?;
            count.directories += 1;
        } else if file_type.is_file() {
            let file = File::open(entry.path()).map_err(file_error::at("open", entry.path()))?;
            header.set_entry_type(EntryType::Regular);
            header.set_size(metadata.len());
            // A file that changes size while it is read would corrupt the archive: `take`
            // stops at the size written in the header, and a short read fails below.
            let mut limited = file.take(metadata.len());
            builder
                .append_data(&mut header, &name, &mut limited)
                .map_err(file_error::at("archive", entry.path()))?;
            count.files += 1;
        } else if file_type.is_symlink() {
            let target = fs::read_link(entry.path())
                .map_err(file_error::at("read the link", entry.path()))?;
            header.set_entry_type(EntryType::Symlink);
            header.set_size(0);
            builder
                .append_link(&mut header, &name, &target)
                .map_err(file_error::at("archive the link", entry.path()))?;
            count.links += 1;
        } else {
            tracing::warn!(path = %entry.path().display(), "skipping a socket, FIFO or device: an artifact carries files, directories and links only");
            count.skipped += 1;
        }
    }
    builder
        .into_inner()
        .and_then(|mut out| out.flush())
        .map_err(file_error::at("finish the archive of", dir))?;
    Ok(count)
}

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
/// read to its end, so a digest computed over it covers every byte.
pub fn unpack(input: impl Read, prefix: &Path, root: &Path) -> Result<UnpackCount, ArchiveError> {
    let mut archive = tar::Archive::new(input);
    let mut count = UnpackCount::default();
    let mut directory_modes = BTreeMap::new();
    let mut buffer = vec![0u8; COPY_BUFFER];
    let entries = archive.entries().map_err(ArchiveError::Read)?;
    for entry in entries {
        let mut entry = entry.map_err(ArchiveError::Read)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let unsafe_entry = |why: &str| ArchiveError::UnsafeEntry {
            name: name.clone(),
            why: why.to_string(),
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
        ensure_no_symlink_between(root, &relative).map_err(unsafe_entry)?;
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let kind = entry.header().entry_type();
        match kind {
            EntryType::Directory => {
                if relative.as_os_str().is_empty() {
                    directory_modes.insert(root.to_path_buf(), mode);
                    continue;
                }
                match target.symlink_metadata() {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(_) => {
                        remove_entry(&target)?;
                        fs::create_dir(&target).map_err(file_error::at("create", &target))?;
                    }
                    Err(_) => {
                        fs::create_dir_all(&target).map_err(file_error::at("create", &target))?
                    }
                }
                directory_modes.insert(target, mode);
                count.directories += 1;
            }
            EntryType::Regular | EntryType::Continuous => {
                if relative.as_os_str().is_empty() {
                    return Err(unsafe_entry(
                        "is a file where the layer's directory should be",
                    ));
                }
                prepare_parent(&target)?;
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode | 0o200)
                    .open(&target)
                    .map_err(file_error::at("create", &target))?;
                let written = copy(&mut entry, &mut file, &target, &mut buffer)?;
                count.bytes += written;
                count.files += 1;
                if mode & 0o200 == 0 {
                    fs::set_permissions(&target, fs::Permissions::from_mode(mode))
                        .map_err(file_error::at("set the mode of", &target))?;
                }
                set_mtime(&target, entry.header().mtime().ok());
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(ArchiveError::Read)?
                    .ok_or_else(|| unsafe_entry("is a link without a target"))?;
                prepare_parent(&target)?;
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(file_error::at("link", &target))?;
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
                    .map(|p| root.join(p))
                    .map_err(|_| unsafe_entry("links outside the layer"))?;
                ensure_no_symlink_between(root, source.strip_prefix(root).unwrap_or(&source))
                    .map_err(unsafe_entry)?;
                let is_file = source.symlink_metadata().is_ok_and(|m| m.is_file());
                if !is_file {
                    return Err(unsafe_entry(
                        "links to something that is not a file unpacked before it",
                    ));
                }
                prepare_parent(&target)?;
                fs::hard_link(&source, &target).map_err(file_error::at("link", &target))?;
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
    // Directory modes last, deepest first, so a read-only directory did not block its content.
    for (dir, mode) in directory_modes.iter().rev() {
        fs::set_permissions(dir, fs::Permissions::from_mode(*mode | 0o700))
            .map_err(file_error::at("set the mode of", dir))?;
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

/// No directory between `root` and the entry is a symbolic link, so creating the entry writes
/// inside `root`.
fn ensure_no_symlink_between(root: &Path, relative: &Path) -> Result<(), &'static str> {
    let mut at = root.to_path_buf();
    let parents: Vec<_> = relative.components().collect();
    for component in parents.iter().take(parents.len().saturating_sub(1)) {
        at.push(component);
        if at
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err("would be written through a symbolic link");
        }
    }
    Ok(())
}

/// Makes the entry's directory, and removes what an earlier entry of the same name left (later
/// entries win, as in tar), never following a link.
fn prepare_parent(target: &Path) -> Result<(), ArchiveError> {
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(file_error::at("create", parent))?;
    }
    if target.symlink_metadata().is_ok() {
        remove_entry(target)?;
    }
    Ok(())
}

fn remove_entry(target: &Path) -> Result<(), ArchiveError> {
    let is_dir = target.symlink_metadata().is_ok_and(|m| m.is_dir());
    if is_dir {
        fs::remove_dir_all(target)
    } else {
        fs::remove_file(target)
    }
    .map_err(file_error::at("replace", target))?;
    Ok(())
}

fn set_mtime(path: &Path, mtime: Option<u64>) {
    if let Some(seconds) = mtime.and_then(|s| i64::try_from(s).ok()) {
        // A file keeps its content without its time; not worth failing a pull over.
        let _ = filetime::set_file_mtime(path, FileTime::from_unix_time(seconds, 0));
    }
}

#[cfg(test)]
mod tests;
