//! What a real node takes from the machine, and gives back. Each node holds a numbered slot, locked
//! under `/run/ocifit-testkit/` for its lifetime, so every machine-global name it uses is its own:
//! the host end of its veth pair, its pod subnet and link, its host firewall rules, its cgroup. Two
//! nodes — of one test binary's threads, or of several engineers' tests — never collide.
//!
//! The kubelet sets a few kernel sysctls that are machine-wide; the first node to start saves their
//! values and the last one to stop restores them. A slot whose owner died without tearing down (a
//! killed test process) is swept by the next node to start, once its lock is free: its leftover
//! processes killed, cgroups and rules removed, and the sysctls restored if no node is left. What
//! stays is the directory and its global lock file (`/run` is emptied at reboot).

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use super::cgroups::Cgroups;
use super::network::{self, Link};
use crate::error::{Error, Result, io};

/// Machine-wide, and gone at reboot like the state it guards.
const STATE_DIR: &str = "/run/ocifit-testkit";
const PROC_SYS: &str = "/proc/sys";
/// The slot numbers: the third octet of the node's subnets.
const SLOTS: std::ops::RangeInclusive<u8> = 1..=250;
/// The sysctls the kubelet sets (`setupKernelTunables`) that no namespace confines.
const GLOBAL_SYSCTLS: [&str; 6] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];
const SAVED_SYSCTLS: &str = "sysctls.saved";
/// Held while slots are taken, swept and given back, and sysctls saved and restored.
const GLOBAL_LOCK: &str = "nodes.lock";

/// One node's share of the machine. Dropping it kills whatever still runs in the node's cgroup,
/// removes the cgroup and the host's rules, frees the slot and, if it was the last node, restores
/// the sysctls.
#[derive(Debug)]
pub(crate) struct Slot {
    index: u8,
    cgroups: Cgroups,
    lock: Option<File>,
}

impl Slot {
    /// Takes the lowest free slot, after sweeping the slots dead owners left behind, and saves the
    /// sysctls if no other node is running.
    pub(crate) fn acquire() -> Result<Self> {
        let state = Path::new(STATE_DIR);
        std::fs::create_dir_all(state).map_err(io("create directory", state))?;
        let _global = lock(&state.join(GLOBAL_LOCK))?;
        let mut chosen = None;
        for index in SLOTS {
            let path = lock_path(index);
            match File::options().write(true).open(&path) {
                // A lock file outlives only an owner that died without tearing down.
                Ok(file) if file.try_lock().is_ok() => {
                    teardown(index, &Cgroups::new(&cgroup_name(index)));
                    if chosen.is_none() {
                        chosen = Some((index, file));
                    } else {
                        let _ = std::fs::remove_file(&path);
                    }
                }
                Ok(_) => {}
                Err(_) if chosen.is_none() => {
                    let file = File::create(&path).map_err(io("create", &path))?;
                    file.try_lock()
                        .map_err(|e| std::io::Error::other(e.to_string()))
                        .map_err(io("lock", &path))?;
                    chosen = Some((index, file));
                }
                Err(_) => {}
            }
        }
        let (index, lock) = chosen.ok_or_else(|| Error::Format {
            action: "reserve a real node slot".into(),
            message: format!("all {} slots under {STATE_DIR} are in use", SLOTS.count()),
        })?;
        save_sysctls_if_first(state, Path::new(PROC_SYS))?;
        Ok(Self {
            index,
            cgroups: Cgroups::new(&cgroup_name(index)),
            lock: Some(lock),
        })
    }

    /// The node's link and subnets: `10.245.N.0/30` between host (`.1`) and node (`.2`), pods in
    /// `10.244.N.0/24`.
    pub(crate) fn link(&self) -> Link {
        Link {
            host_veth: host_veth(self.index),
            host_ip: Ipv4Addr::new(10, 245, self.index, 1),
            node_ip: Ipv4Addr::new(10, 245, self.index, 2),
            pod_subnet: format!("10.244.{}.0/24", self.index),
        }
    }

    /// The node's cgroup.
    pub(crate) fn cgroups(&self) -> &Cgroups {
        &self.cgroups
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        teardown(self.index, &self.cgroups);
        // Under the global lock nobody is between opening a lock file and locking it, so it can go.
        let Ok(_global) = lock(&Path::new(STATE_DIR).join(GLOBAL_LOCK)) else {
            return;
        };
        let _ = std::fs::remove_file(lock_path(self.index));
        if let Some(lock) = self.lock.take() {
            // Unlocked before it is closed: a child forked meanwhile by another thread shares the
            // lock until it execs, and would keep the slot looking held.
            let _ = lock.unlock();
        }
        restore_sysctls_if_last(Path::new(STATE_DIR), Path::new(PROC_SYS));
    }
}

/// Undoes a slot's machine-wide state: processes, cgroups, host rules and link.
fn teardown(index: u8, cgroups: &Cgroups) {
    cgroups.kill_and_remove();
    network::unwire(&host_veth(index));
}

/// Saves the kernel sysctls in `state` if the caller's node is the only one running; values
/// saved by a node that died are the machine's own, and are put back first.
fn save_sysctls_if_first(state: &Path, proc_sys: &Path) -> Result<()> {
    if running_nodes(state) != 1 {
        return Ok(());
    }
    restore_sysctls(state, proc_sys);
    let mut saved = String::new();
    for key in GLOBAL_SYSCTLS {
        let file = proc_sys.join(key);
        let value = std::fs::read_to_string(&file).map_err(io("read", &file))?;
        saved.push_str(&format!("{key}={}\n", value.trim()));
    }
    let path = state.join(SAVED_SYSCTLS);
    std::fs::write(&path, saved).map_err(io("write", &path))
}

/// Restores the saved sysctls if no node runs any more.
fn restore_sysctls_if_last(state: &Path, proc_sys: &Path) {
    if running_nodes(state) == 0 {
        restore_sysctls(state, proc_sys);
    }
}

/// How many slots a live node holds (the caller's own lock counts, when it holds one).
fn running_nodes(state: &Path) -> usize {
    SLOTS
        .filter(|index| {
            File::options()
                .write(true)
                .open(state.join(lock_name(*index)))
                .is_ok_and(|file| file.try_lock().is_err())
        })
        .count()
}

/// Writes back the saved sysctls and forgets them; nothing saved is nothing to do.
fn restore_sysctls(state: &Path, proc_sys: &Path) {
    let path = state.join(SAVED_SYSCTLS);
    let Ok(saved) = std::fs::read_to_string(&path) else {
        return;
    };
    for (key, value) in saved.lines().filter_map(|line| line.split_once('=')) {
        if GLOBAL_SYSCTLS.contains(&key) {
            let _ = std::fs::write(proc_sys.join(key), value);
        }
    }
    let _ = std::fs::remove_file(&path);
}

fn host_veth(index: u8) -> String {
    format!("ocifit{index}h")
}

fn lock_path(index: u8) -> PathBuf {
    Path::new(STATE_DIR).join(lock_name(index))
}

fn lock_name(index: u8) -> String {
    format!("node-{index}.lock")
}

fn cgroup_name(index: u8) -> String {
    format!("ocifit-node-{index}")
}

/// An exclusive lock on `path`, waiting for it.
fn lock(path: &Path) -> Result<File> {
    let file = File::create(path).map_err(io("create", path))?;
    file.lock().map_err(io("lock", path))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state directory and a stand-in for `/proc/sys` holding every sysctl at `value`.
    fn machine(value: &str) -> (tempfile::TempDir, tempfile::TempDir) {
        let state = tempfile::tempdir().unwrap();
        let proc_sys = tempfile::tempdir().unwrap();
        set_all(proc_sys.path(), value);
        (state, proc_sys)
    }

    fn set_all(proc_sys: &Path, value: &str) {
        for key in GLOBAL_SYSCTLS {
            let path = proc_sys.join(key);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("{value}\n")).unwrap();
        }
    }

    fn values(proc_sys: &Path) -> Vec<String> {
        GLOBAL_SYSCTLS
            .iter()
            .map(|key| {
                std::fs::read_to_string(proc_sys.join(key))
                    .unwrap()
                    .trim()
                    .to_owned()
            })
            .collect()
    }

    /// Holds slot `index` as a running node does.
    fn hold(state: &Path, index: u8) -> File {
        let file = File::create(state.join(lock_name(index))).unwrap();
        file.lock().unwrap();
        file
    }

    /// Frees a slot as the kernel does when its node ends. Not by closing alone: another test of
    /// this process forking at that moment shares the lock until its child execs.
    fn release(slot: File) {
        slot.unlock().unwrap();
    }

    #[test]
    fn only_locked_slots_count_as_running_nodes() {
        let (state, _proc) = machine("0");
        let _first = hold(state.path(), 1);
        let _second = hold(state.path(), 7);
        // A lock file whose owner died is free.
        File::create(state.path().join(lock_name(9))).unwrap();
        assert_eq!(running_nodes(state.path()), 2);
    }

    #[test]
    fn the_first_node_saves_the_sysctls_and_the_last_restores_them() {
        let (state, proc_sys) = machine("0");
        let first = hold(state.path(), 1);
        save_sysctls_if_first(state.path(), proc_sys.path()).unwrap();
        let second = hold(state.path(), 2);
        save_sysctls_if_first(state.path(), proc_sys.path()).unwrap();
        set_all(proc_sys.path(), "1"); // what the kubelets set

        release(first);
        restore_sysctls_if_last(state.path(), proc_sys.path());
        assert!(
            values(proc_sys.path()).iter().all(|v| v == "1"),
            "another node runs"
        );

        release(second);
        restore_sysctls_if_last(state.path(), proc_sys.path());
        assert!(values(proc_sys.path()).iter().all(|v| v == "0"));
        assert!(!state.path().join(SAVED_SYSCTLS).exists());
    }

    #[test]
    fn values_saved_by_a_node_that_died_are_put_back_before_the_next_save() {
        let (state, proc_sys) = machine("0");
        let dead = hold(state.path(), 1);
        save_sysctls_if_first(state.path(), proc_sys.path()).unwrap();
        set_all(proc_sys.path(), "1");
        release(dead); // killed: nothing restored

        let _next = hold(state.path(), 2);
        save_sysctls_if_first(state.path(), proc_sys.path()).unwrap();
        assert!(values(proc_sys.path()).iter().all(|v| v == "0"));
        let saved = std::fs::read_to_string(state.path().join(SAVED_SYSCTLS)).unwrap();
        assert!(saved.lines().all(|l| l.ends_with("=0")), "{saved}");
    }
}
