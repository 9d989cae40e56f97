//! The temporary directory of one cluster or registry, under `$TMPDIR/ocifit-testkit/`: locked while
//! in use and removed on Drop. A directory whose owner died without dropping it (a killed test
//! process, or a shared cluster, whose static is never dropped) is removed by the next start, once
//! its lock is free. It knows nothing of what is stored inside.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

use crate::error::{Result, io};

/// The lock file inside each work directory; its owner holds an exclusive lock on it.
const LOCK_FILE: &str = "lock";
/// The lock file's name until it is locked.
const CREATING_FILE: &str = "lock.creating";
/// A directory without a lock file younger than this may be one being created right now.
const CREATION_GRACE: Duration = Duration::from_secs(60);

/// A locked temporary directory, removed on Drop.
#[derive(Debug)]
pub(crate) struct Workdir {
    // Dropped before the lock is released, so no sweeper races the removal.
    dir: TempDir,
    _lock: File,
}

impl Workdir {
    /// Creates `$TMPDIR/ocifit-testkit/<prefix>XXXX`, after removing directories left behind.
    pub(crate) fn create(prefix: &str) -> Result<Self> {
        let parent = std::env::temp_dir().join("ocifit-testkit");
        std::fs::create_dir_all(&parent).map_err(io("create directory", &parent))?;
        sweep(&parent);
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&parent)
            .map_err(io("create directory in", &parent))?;
        // Locked under another name, then renamed: a sweeper never finds the lock file unlocked
        // (it would take the lock itself, and this create would fail or lose its directory).
        let unlocked = dir.path().join(CREATING_FILE);
        let lock = File::create(&unlocked).map_err(io("create", &unlocked))?;
        lock.try_lock()
            .map_err(|e| std::io::Error::other(e.to_string()))
            .map_err(io("lock", &unlocked))?;
        let lock_path = dir.path().join(LOCK_FILE);
        std::fs::rename(&unlocked, &lock_path).map_err(io("rename to", &lock_path))?;
        Ok(Self { dir, _lock: lock })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the directory.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Removes work directories whose owners are gone; best effort, since another process may be
/// sweeping at the same time.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if is_abandoned(&path) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

fn is_abandoned(dir: &Path) -> bool {
    match File::open(dir.join(LOCK_FILE)) {
        // The lock is released when its owner's process ends, however it ends.
        Ok(lock) => lock.try_lock().is_ok(),
        Err(_) => std::fs::metadata(dir)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > CREATION_GRACE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_in_use_is_kept_and_an_abandoned_one_is_removed() {
        let parent = tempfile::tempdir().unwrap();
        let in_use = parent.path().join("in-use");
        std::fs::create_dir(&in_use).unwrap();
        let lock = File::create(in_use.join(LOCK_FILE)).unwrap();
        lock.try_lock().unwrap();
        let abandoned = parent.path().join("abandoned");
        std::fs::create_dir(&abandoned).unwrap();
        File::create(abandoned.join(LOCK_FILE)).unwrap();
        let being_created = parent.path().join("being-created");
        std::fs::create_dir(&being_created).unwrap();

        sweep(parent.path());

        assert!(in_use.exists());
        assert!(!abandoned.exists());
        assert!(being_created.exists());
    }

    #[test]
    fn a_directory_being_created_is_never_swept_or_its_lock_taken() {
        let parent = std::env::temp_dir().join("ocifit-testkit");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sweeper = {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    sweep(&parent);
                }
            })
        };
        let created: Vec<Result<Workdir>> =
            (0..300).map(|_| Workdir::create("sweep-race-")).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        sweeper.join().unwrap();
        for workdir in created {
            let workdir = workdir.unwrap();
            assert!(workdir.path().join(LOCK_FILE).is_file());
        }
    }

    #[test]
    fn drop_removes_the_directory() {
        let workdir = Workdir::create("unit-").unwrap();
        let path = workdir.path().to_owned();
        assert!(path.join(LOCK_FILE).is_file());
        drop(workdir);
        assert!(!path.exists());
    }
}
