//! Reading a `certs.d` directory: one `<registry namespace>/hosts.toml` per entry. Hidden entries
//! are skipped (a mounted ConfigMap keeps its versions in `..data` and `..<time>`); anything
//! else that is not a directory with a `hosts.toml` is refused, naming it.

use std::path::Path;

use super::{Mirrors, problem};
use crate::registry::error::ConfigError;

impl Mirrors {
    /// Reads every `hosts.toml` under `dir`; the first unusable one fails it all.
    pub fn load(dir: &Path) -> Result<Mirrors, ConfigError> {
        let unreadable = |path: &Path, err: std::io::Error| ConfigError::ReadFile {
            path: path.display().to_string(),
            message: err.to_string(),
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|err| unreadable(dir, err))? {
            let entry = entry.map_err(|err| unreadable(dir, err))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.') {
                names.push(name);
            }
        }
        // One order whatever the file system lists: errors and duplicates are reproducible.
        names.sort();
        let mut mirrors = Mirrors::default();
        for name in names {
            let namespace = dir.join(&name);
            if !namespace.is_dir() {
                return Err(problem(
                    &namespace.display().to_string(),
                    "",
                    "is not a registry's directory (DIR/<registry host>/hosts.toml)",
                ));
            }
            let file = namespace.join("hosts.toml");
            let shown = file.display().to_string();
            let text = match std::fs::read_to_string(&file) {
                Ok(text) => text,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    return Err(problem(
                        &shown,
                        "",
                        "is missing: ocifit reads only hosts.toml (certificates go in --ca-file)",
                    ));
                }
                Err(err) => return Err(unreadable(&file, err)),
            };
            mirrors.add(&name, &shown, &text)?;
        }
        Ok(mirrors)
    }
}
