//! Push and pull of a 1 GiB directory through a registry on loopback, by `ocifit artifact` (this
//! build, release profile) and by the ORAS Python SDK, on the same data in the same run: wall time
//! and peak resident memory (VmHWM, sampled every 20 ms) of each side's process.
//!
//! Two shapes of the same gibibyte: many small files (32 KiB each) and a few large ones (4 × 256
//! MiB). The content is pseudo-random over 16 symbols (about 4 bits of entropy per byte), so
//! gzip has work to do, as with text-like results.
//!
//! Then one large file (half the total) pushed and pulled by ocifit through the stores a cache
//! can have: a registry on its own directory (a cache on an emptyDir), one on an S3 bucket
//! (SeaweedFS from the test kit), and two on one bucket behind a forwarder that hands connections
//! to each in turn (a Service over two replicas); the ORAS SDK alone on the directory beside them.
//!
//! Run: `cargo bench --bench artifact_transfer` (set `OCIFIT_BENCH_BYTES` to use another total
//! size). Everything it writes is removed at the end.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ocifit_testkit::{ObjectStore, Proxy, Registry, Tool, Tools};

const MIB: u64 = 1024 * 1024;

const SDK_PUSH: &str = r#"
import sys, oras.client
client = oras.client.OrasClient(hostname=sys.argv[1], insecure=True)
client.push(target=sys.argv[2], files=[sys.argv[3]], disable_path_validation=True, quiet=True)
"#;

const SDK_PULL: &str = r#"
import sys, oras.client
client = oras.client.OrasClient(hostname=sys.argv[1], insecure=True)
client.pull(target=sys.argv[2], outdir=sys.argv[3])
"#;

struct Measured {
    seconds: f64,
    peak_rss: u64,
}

/// Runs a command to its end, sampling its peak resident memory.
fn measure(command: &mut Command) -> Measured {
    let started = Instant::now();
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_file) {
            peak = peak.max(vm_hwm(&status));
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let seconds = started.elapsed().as_secs_f64();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Measured {
        seconds,
        peak_rss: peak,
    }
}

/// VmHWM (peak resident set) of a /proc status, in bytes.
fn vm_hwm(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Writes `count` files of `size` bytes under `dir`, in subdirectories of 1,000.
fn generate(dir: &Path, count: u64, size: u64) {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut block = vec![0u8; 64 * 1024];
    for i in 0..count {
        let sub = dir.join(format!("part-{:03}", i / 1000));
        std::fs::create_dir_all(&sub).unwrap();
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(sub.join(format!("file-{i:06}.dat"))).unwrap(),
        );
        let mut left = size;
        while left > 0 {
            for byte in block.iter_mut() {
                // xorshift64*, folded onto 16 symbols.
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                *byte = b'a' + (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 60) as u8;
            }
            let n = left.min(block.len() as u64) as usize;
            file.write_all(&block[..n]).unwrap();
            left -= n as u64;
        }
        file.flush().unwrap();
    }
}

/// Total bytes and files under `dir`.
fn size_of(dir: &Path) -> (u64, u64) {
    let mut total = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            let (bytes, files) = size_of(&entry.path());
            total = (total.0 + bytes, total.1 + files);
        } else {
            total = (total.0 + meta.len(), total.1 + 1);
        }
    }
    total
}

fn row(shape: &str, side: &str, op: &str, bytes: u64, m: &Measured) {
    println!(
        "| {shape:<20} | {side:<15} | {op:<4} | {:>7.2} | {:>6.1} | {:>12.1} |",
        m.seconds,
        bytes as f64 / MIB as f64 / m.seconds,
        m.peak_rss as f64 / MIB as f64
    );
}

fn main() {
    let total: u64 = std::env::var("OCIFIT_BENCH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024 * MIB);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let python = Tools::locate().unwrap().path(Tool::OrasPython).unwrap();
    let ocifit = PathBuf::from(env!("CARGO_BIN_EXE_ocifit"));
    let work = tempfile::tempdir().unwrap();

    println!(
        "artifact transfer, {} MiB per shape, registry on loopback",
        total / MIB
    );
    println!("| shape                | client          | op   | seconds | MiB/s  | peak RSS MiB |");
    println!("|----------------------|-----------------|------|---------|--------|--------------|");
    for (shape, count, size) in [
        ("many small (32 KiB)", total / (32 * 1024), 32 * 1024),
        ("few large (4 files)", 4, total / 4),
    ] {
        // A fresh registry per shape: nothing of the previous one is reused.
        let registry = runtime.block_on(Registry::builder().start()).unwrap();
        let data = work.path().join("data");
        generate(&data, count, size);
        let (bytes, files) = size_of(&data);
        assert_eq!(files, count);

        let ours = registry.reference("bench/ocifit:v1");
        let push = measure(
            Command::new(&ocifit)
                .args(["artifact", "push", "--plain-http", &ours])
                .arg(&data),
        );
        row(shape, "ocifit", "push", bytes, &push);
        let theirs = registry.reference("bench/sdk:v1");
        let sdk_push = measure(
            Command::new(&python)
                .env("TMPDIR", work.path())
                .current_dir(work.path())
                .args(["-c", SDK_PUSH, registry.addr(), &theirs, "data"]),
        );
        row(shape, "ORAS Python SDK", "push", bytes, &sdk_push);

        // Each pulls what the other pushed: both layouts are read by both.
        let pulled = work.path().join("pulled-ocifit");
        let pull = measure(
            Command::new(&ocifit)
                .args(["artifact", "pull", "--plain-http", "-o"])
                .arg(&pulled)
                .arg(&theirs),
        );
        row(shape, "ocifit", "pull", bytes, &pull);
        assert_eq!(size_of(&pulled.join("data")), (bytes, files));
        std::fs::remove_dir_all(&pulled).unwrap();

        let sdk_pulled = work.path().join("pulled-sdk");
        std::fs::create_dir(&sdk_pulled).unwrap();
        let sdk_pull = measure(
            Command::new(&python)
                .env("TMPDIR", work.path())
                .current_dir(&sdk_pulled)
                .args(["-c", SDK_PULL, registry.addr(), &ours])
                .arg(&sdk_pulled),
        );
        row(shape, "ORAS Python SDK", "pull", bytes, &sdk_pull);
        assert_eq!(size_of(&sdk_pulled.join("data")), (bytes, files));
        std::fs::remove_dir_all(&sdk_pulled).unwrap();
        std::fs::remove_dir_all(&data).unwrap();
    }
    by_store(&runtime, &ocifit, &python, work.path(), total / 2);
}

/// One file of `size` bytes through each store a cache can have, pushed and pulled by ocifit; the
/// ORAS SDK on the directory store for comparison.
fn by_store(
    runtime: &tokio::runtime::Runtime,
    ocifit: &Path,
    python: &Path,
    work: &Path,
    size: u64,
) {
    let data = work.join("large");
    generate(&data, 1, size);
    let file = data.join("part-000/file-000000.dat");
    let start =
        |builder: ocifit_testkit::RegistryBuilder| runtime.block_on(builder.start()).unwrap();
    let store = runtime
        .block_on(ObjectStore::builder().bucket("one").bucket("two").start())
        .unwrap();
    let directory = start(Registry::builder());
    let one = start(Registry::builder().object_store(&store, "one"));
    let two = [
        start(Registry::builder().object_store(&store, "two")),
        start(Registry::builder().object_store(&store, "two")),
    ];
    let balanced = runtime
        .block_on(Proxy::balancing(&[two[0].addr(), two[1].addr()]))
        .unwrap();

    println!();
    println!("one file of {} MiB, by the cache's store", size / MIB);
    println!("| store                | client          | op   | seconds | MiB/s  | peak RSS MiB |");
    println!("|----------------------|-----------------|------|---------|--------|--------------|");
    for (name, addr) in [
        ("directory (emptyDir)", directory.addr()),
        ("S3, 1 replica", one.addr()),
        ("S3, 2 replicas", balanced.addr.as_str()),
    ] {
        let reference = format!("{addr}/bench/large:v1");
        let push = measure(
            Command::new(ocifit)
                .args(["artifact", "push", "--plain-http", &reference])
                .arg(&file),
        );
        row(name, "ocifit", "push", size, &push);
        let pulled = work.join("pulled-large");
        let pull = measure(
            Command::new(ocifit)
                .args(["artifact", "pull", "--plain-http", "-o"])
                .arg(&pulled)
                .arg(&reference),
        );
        row(name, "ocifit", "pull", size, &pull);
        assert_eq!(size_of(&pulled), (size, 1));
        std::fs::remove_dir_all(&pulled).unwrap();
    }

    let theirs = directory.reference("bench/sdk-large:v1");
    let sdk_push = measure(
        Command::new(python)
            .env("TMPDIR", work)
            .current_dir(file.parent().unwrap())
            .args(["-c", SDK_PUSH, directory.addr(), &theirs, "file-000000.dat"]),
    );
    row(
        "directory (emptyDir)",
        "ORAS Python SDK",
        "push",
        size,
        &sdk_push,
    );
    let sdk_pulled = work.join("pulled-sdk-large");
    std::fs::create_dir(&sdk_pulled).unwrap();
    let sdk_pull = measure(
        Command::new(python)
            .current_dir(&sdk_pulled)
            .args(["-c", SDK_PULL, directory.addr(), &theirs])
            .arg(&sdk_pulled),
    );
    row(
        "directory (emptyDir)",
        "ORAS Python SDK",
        "pull",
        size,
        &sdk_pull,
    );
    assert_eq!(size_of(&sdk_pulled), (size, 1));
    std::fs::remove_dir_all(&sdk_pulled).unwrap();
    std::fs::remove_dir_all(&data).unwrap();
}
