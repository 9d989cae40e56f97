//! A real node's cgroup, `/<name>` in every cgroup v1 hierarchy (what these machines mount): its
//! processes (its namespaces' init, containerd and the shims it starts, the kubelet, kube-proxy)
//! join `/<name>/system` before they exec,
//! and the kubelet puts every pod under `/<name>/kubepods` (`cgroupRoot`). So one cgroup holds
//! everything the node runs, and tearing it down kills exactly that: frozen first (the freezer), so
//! nothing forks while it is being killed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result, io};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// The sub-group of the node's own processes (beside the kubelet's `kubepods`).
const SYSTEM: &str = "system";
/// How long the processes may take to die and the cgroups to empty.
const KILL_TIMEOUT: Duration = Duration::from_secs(10);

/// The cgroup `/<name>` in every hierarchy.
#[derive(Debug)]
pub(crate) struct Cgroups {
    name: String,
}

impl Cgroups {
    pub(crate) fn new(name: &str) -> Self {
        Self { name: name.into() }
    }

    /// The cgroup's path as the kubelet's `cgroupRoot` names it.
    pub(crate) fn kubelet_root(&self) -> String {
        format!("/{}", self.name)
    }

    /// Creates `/<name>/system` in every hierarchy (cpuset groups get their parent's CPUs and
    /// memory nodes, without which no process may join).
    pub(crate) fn create(&self) -> Result<()> {
        if Path::new(CGROUP_ROOT).join("cgroup.controllers").exists() {
            return Err(Error::Format {
                action: "create the real node's cgroup".into(),
                message: "this machine mounts cgroup v2; the test kit's real node supports the \
                          cgroup v1 hierarchies these machines mount"
                    .into(),
            });
        }
        for hierarchy in hierarchies() {
            let mut parent = hierarchy.clone();
            for part in [self.name.as_str(), SYSTEM] {
                let dir = parent.join(part);
                std::fs::create_dir_all(&dir).map_err(io("create cgroup", &dir))?;
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    if let Ok(value) = std::fs::read_to_string(parent.join(file)) {
                        let path = dir.join(file);
                        std::fs::write(&path, value.trim()).map_err(io("write", &path))?;
                    }
                }
                parent = dir;
            }
        }
        Ok(())
    }

    /// Shell commands that move the shell running them into `/<name>/system` in every hierarchy
    /// (so what it then execs starts there, with no moment outside).
    pub(crate) fn join_commands(&self) -> String {
        hierarchies()
            .iter()
            .map(|h| {
                let procs = h.join(&self.name).join(SYSTEM).join("cgroup.procs");
                format!("echo $$ > '{}'", procs.display())
            })
            .collect::<Vec<_>>()
            .join(" && ")
    }

    /// Kills every process in the cgroup and removes it from every hierarchy; best effort, for
    /// teardown (a cgroup that does not exist is nothing to do).
    pub(crate) fn kill_and_remove(&self) {
        let state = Path::new(CGROUP_ROOT)
            .join("freezer")
            .join(&self.name)
            .join("freezer.state");
        let deadline = Instant::now() + KILL_TIMEOUT;
        loop {
            // Frozen, nothing forks while the list is read and killed; a killed task dies once
            // thawed.
            let frozen = std::fs::write(&state, "FROZEN").is_ok();
            let pids: Vec<String> = hierarchies()
                .iter()
                .flat_map(|h| processes(&h.join(&self.name)))
                .collect();
            if !pids.is_empty() {
                let _ = std::process::Command::new("kill")
                    .arg("-KILL")
                    .args(&pids)
                    .stderr(std::process::Stdio::null())
                    .status();
            }
            if frozen {
                let _ = std::fs::write(&state, "THAWED");
            }
            if pids.is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for hierarchy in hierarchies() {
            remove_tree(&hierarchy.join(&self.name), deadline);
        }
    }
}

/// Every mounted v1 hierarchy (a directory of `/sys/fs/cgroup` with a `cgroup.procs`), each once
/// (co-mounted controllers appear under several names).
fn hierarchies() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(CGROUP_ROOT)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("cgroup.procs").is_file())
        .filter_map(|path| path.canonicalize().ok())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The processes in `dir` and below.
fn processes(dir: &Path) -> Vec<String> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return pids;
    };
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(procs.split_whitespace().map(str::to_owned));
    }
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            pids.extend(processes(&entry.path()));
        }
    }
    pids
}

/// Removes the cgroup `dir` and its children, deepest first; an emptied cgroup may take a moment
/// to become removable.
fn remove_tree(dir: &Path, deadline: Instant) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path(), deadline);
        }
    }
    while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}
