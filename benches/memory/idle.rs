//! What `ocifit run` does while the cluster is quiet: its CPU per thread (from
//! `/proc/PID/task/*/schedstat`: nanoseconds on a CPU and the times it was scheduled in, so
//! wake-ups), and the work its own counters saw meanwhile. The CPU is a process's sum over its
//! threads; which threads it comes from says what spends it (the runtime's workers: watches,
//! reconciles, timers; the admission host's workers; the allocator's background threads).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ocifit_cluster_tests::{Controller, get};

/// The counters of ocifit's own work, summed over their labels.
pub const WORK: [&str; 4] = [
    "ocifit_reconciles_total",
    "ocifit_status_writes_total",
    "ocifit_webhook_index_rebuilds_total",
    "ocifit_image_selection_artifact_fetches_total",
];

/// One thread's CPU so far.
#[derive(Clone, Copy, Default)]
struct Spent {
    nanos: u64,
    scheduled: u64,
}

/// Each thread's CPU so far, by thread id, with its name.
fn threads(pid: u32) -> BTreeMap<u32, (String, Spent)> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        let fields: Vec<u64> = stat
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        if let [nanos, _, scheduled] = fields[..] {
            out.insert(tid, (name.trim().to_owned(), Spent { nanos, scheduled }));
        }
    }
    out
}

/// The sum of every series of `name` (all its label sets) in ocifit's `/metrics`.
pub async fn counter(controller: &Controller, name: &str) -> f64 {
    let Some((_, body)) = get(&controller.admin, "/metrics").await else {
        return 0.0;
    };
    body.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The work counters now.
async fn work(controller: &Controller) -> Vec<f64> {
    let mut out = Vec::new();
    for name in WORK {
        out.push(counter(controller, name).await);
    }
    out
}

/// Waits until ocifit's work counters have not moved for `still` (at most `limit`); how long
/// that took. A burst of objects leaves work behind it (watch events, reconciles, status
/// writes): CPU measured before it ends is that work, not idling.
pub async fn settle(controller: &Controller, still: Duration, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut last = work(controller).await;
    let mut since = Instant::now();
    while since.elapsed() < still && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = work(controller).await;
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    started.elapsed() - since.elapsed().min(started.elapsed())
}

/// The process's CPU over `window` while `load` runs, as a share of one core, printed with
/// each thread group's share, its wake-ups per second, and the work counters' moves.
pub async fn cpu_share(
    controller: &Controller,
    what: &str,
    window: Duration,
    load: impl std::future::Future<Output = ()>,
) -> f64 {
    let pid = controller.pid();
    let work_before = work(controller).await;
    let before = threads(pid);
    let started = Instant::now();
    let _ = tokio::time::timeout(window, load).await;
    let elapsed = started.elapsed().as_secs_f64();
    let after = threads(pid);
    let work_after = work(controller).await;
    // By thread name, numbers dropped: a pool's threads together.
    let mut groups: BTreeMap<String, (f64, f64, usize)> = BTreeMap::new();
    let mut total = 0.0;
    for (tid, (name, spent)) in &after {
        let was = before.get(tid).map(|(_, s)| *s).unwrap_or_default();
        let nanos = spent.nanos.saturating_sub(was.nanos) as f64;
        let scheduled = spent.scheduled.saturating_sub(was.scheduled) as f64;
        total += nanos;
        let group = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == ' ');
        let entry = groups.entry(group.to_owned()).or_default();
        entry.0 += nanos;
        entry.1 += scheduled;
        entry.2 += 1;
    }
    let share = total / 1e9 / elapsed;
    println!("CPU of ocifit run, {what}: {:.2}% of a core", share * 100.0);
    let mut rows: Vec<_> = groups.into_iter().collect();
    rows.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
    for (group, (nanos, scheduled, count)) in rows.into_iter().filter(|row| row.1.1 > 0.0) {
        println!(
            "  {group:<18} ({count:>2} threads) {:>6.3}% of a core, {:>7.1} wake-ups/s",
            nanos / 1e9 / elapsed * 100.0,
            scheduled / elapsed
        );
    }
    let moved: Vec<String> = WORK
        .iter()
        .zip(work_before.iter().zip(&work_after))
        .map(|(name, (before, after))| {
            format!("{} +{}", name.trim_start_matches("ocifit_"), after - before)
        })
        .collect();
    println!("  its work meanwhile: {}", moved.join(", "));
    share
}
