//! `prepare`, the init container of a step's pod: installs the launcher and pulls the step's
//! inputs, merged into one directory. The launcher runs in the step's container whatever its
//! image holds (no shell, another libc, nothing at all): the running binary, its dynamic loader
//! (as `ld.so`) and the shared libraries it has loaded (read from `/proc/self/maps`), copied into
//! one directory of the run volume, run as `<dir>/ld.so --library-path <dir> <dir>/ocifit …`.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::inputs::{MergeError, Merged};
use super::pull::{PullError, pull};
use super::report::Report;
use super::{Budget, Limits};
use super::{FileError, file_error};
use crate::registry::{Reference, Registry};

/// Why preparing a step failed.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("failed to install the launcher")]
    Install(#[from] InstallError),
    #[error("failed to pull input {reference}")]
    Pull {
        reference: String,
        #[source]
        source: PullError,
    },
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error(transparent)]
    Io(#[from] FileError),
}

/// Installs the launcher into `launcher` (when given) and pulls each input beside the others (one
/// volume, so moving in is a rename), then merges them into `into`; a file in two inputs is an
/// error naming both. All inputs together write within `limits`; `report` gets what was pulled.
pub async fn prepare(
    registry: &Registry,
    inputs: &[Reference],
    into: &Path,
    (unpack, limits): (bool, Limits),
    launcher: Option<&Path>,
    report: &mut Report,
) -> Result<(), PrepareError> {
    if let Some(dir) = launcher {
        install_self(dir)?;
        tracing::info!(dir = %dir.display(), "launcher installed");
    }
    let mut merged = Merged::default();
    let budget = std::sync::Arc::new(Budget::new(limits));
    for (n, reference) in inputs.iter().enumerate() {
        let alone = into.join(format!(".ocifit-input-{n}"));
        let started = std::time::Instant::now();
        let pulled = pull(registry, reference, &alone, unpack, &budget)
            .await
            .map_err(|source| PrepareError::Pull {
                reference: reference.whole(),
                source,
            })?;
        report.moved(pulled.layers.iter().map(|l| l.size), started.elapsed());
        merged.add(&alone, into, &reference.whole())?;
        // Only the directories merged into others are left, empty.
        std::fs::remove_dir_all(&alone).map_err(file_error("remove", &alone))?;
        let layers: Vec<String> = pulled
            .layers
            .iter()
            .map(|l| l.path.display().to_string())
            .collect();
        tracing::info!(reference = %pulled.reference, digest = %pulled.digest, layers = ?layers, "input pulled");
    }
    Ok(())
}

/// The loader's name in the launcher's directory.
const LOADER: &str = "ld.so";
/// The binary's name in the launcher's directory.
const BINARY: &str = "ocifit";

/// What the launcher needs besides the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Needs {
    /// The dynamic loader (`ld-linux-x86-64.so.2`, `ld-linux-aarch64.so.1`, …).
    pub loader: PathBuf,
    /// The shared libraries, by the names the loader looks them up by.
    pub libraries: Vec<PathBuf>,
}

/// Why the launcher could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "ocifit runs without a dynamic loader (a static build): nothing tells how to run it in another image"
    )]
    NoLoader,
    #[error(transparent)]
    Io(#[from] FileError),
}

/// The loader and libraries among a process's mappings (`/proc/<pid>/maps`): file-backed
/// mappings whose name is a shared object; the one named `ld-*` is the loader.
fn needs(maps: &str) -> Result<Needs, InstallError> {
    let mut loader = None;
    let mut libraries = BTreeSet::new();
    for line in maps.lines() {
        // address perms offset dev inode pathname — the path is the sixth field, may hold spaces.
        let Some(path) = line.splitn(6, ' ').nth(5).map(str::trim) else {
            continue;
        };
        if !path.starts_with('/') || path.ends_with(" (deleted)") {
            continue;
        }
        let path = PathBuf::from(path);
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let shared_object = (name.starts_with("lib") || name.starts_with("ld-"))
            && (name.ends_with(".so") || name.contains(".so."));
        if !shared_object {
            continue;
        }
        if name.starts_with("ld-") {
            loader = Some(path);
        } else {
            libraries.insert(path);
        }
    }
    Ok(Needs {
        loader: loader.ok_or(InstallError::NoLoader)?,
        libraries: libraries.into_iter().collect(),
    })
}

/// Copies `binary` (this process's executable) with what it `needs` into `dir`.
fn install(binary: &Path, needs: &Needs, dir: &Path) -> Result<(), InstallError> {
    fs::create_dir_all(dir).map_err(file_error("create", dir))?;
    let mut copies = vec![
        (binary.to_path_buf(), dir.join(BINARY)),
        (needs.loader.clone(), dir.join(LOADER)),
    ];
    for library in &needs.libraries {
        if let Some(name) = library.file_name() {
            copies.push((library.clone(), dir.join(name)));
        }
    }
    for (from, to) in copies {
        fs::copy(&from, &to).map_err(file_error("copy", &from))?;
        fs::set_permissions(&to, fs::Permissions::from_mode(0o755))
            .map_err(file_error("make executable", &to))?;
    }
    Ok(())
}

/// Installs the running process's own binary, loader and libraries into `dir`.
fn install_self(dir: &Path) -> Result<(), InstallError> {
    let maps_path = Path::new("/proc/self/maps");
    let maps = fs::read_to_string(maps_path).map_err(file_error("read", maps_path))?;
    let binary =
        std::env::current_exe().map_err(file_error("find", Path::new("/proc/self/exe")))?;
    install(&binary, &needs(&maps)?, dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c2a00000-55d0c2b00000 r--p 00000000 08:01 1048601                    /usr/local/bin/ocifit
7f1c3a000000-7f1c3a022000 r--p 00000000 08:01 2097160                    /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c3a200000-7f1c3a203000 r--p 00000000 08:01 2097170                    /usr/lib/x86_64-linux-gnu/libgcc_s.so.1
7f1c3a400000-7f1c3a401000 r-xp 00001000 08:01 2097160                    /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c3a600000-7f1c3a610000 rw-p 00000000 00:00 0                          [heap]
7f1c3a800000-7f1c3a801000 r--p 00000000 08:01 2097180                    /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f1c3aa00000-7f1c3aa01000 r--p 00000000 08:01 3097180                    /etc/ld.so.cache
7ffd4b3f0000-7ffd4b3f2000 r-xp 00000000 00:00 0                          [vdso]
";

    #[test]
    fn the_loader_and_each_library_are_read_once_from_the_mappings() {
        assert_eq!(
            needs(MAPS).unwrap(),
            Needs {
                loader: "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2".into(),
                libraries: vec![
                    "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                    "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1".into()
                ],
            }
        );
    }

    #[test]
    fn a_static_binary_has_no_loader_to_copy() {
        let static_maps = "55d0c2a00000-55d0c2b00000 r--p 00000000 08:01 1 /usr/local/bin/ocifit\n";
        assert!(matches!(needs(static_maps), Err(InstallError::NoLoader)));
    }
}
