//! A file-system failure of the step helper, with what it was doing and where: one shape for the
//! archive, the pull and the install, so every such message reads the same.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {path}")]
pub struct FileError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// For `map_err`: the I/O error of doing `action` on `path`.
pub(super) fn at<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> FileError + 'a {
    move |source| FileError {
        action,
        path: path.to_path_buf(),
        source,
    }
}
