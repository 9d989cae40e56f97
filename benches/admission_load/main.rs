//! Admission over HTTPS on loopback, end to end: ocifit's one admission host (its actix-web
//! server over rustls) serving every route `ocifit run` serves — `/mutate` (the planner index
//! built in process from the flavor example's policy status over thousands of nodes),
//! `/placement` (the gate, one PlacementPolicy selecting every pod), `/artifacts/pods` and
//! `/artifacts/jobs` (the artifact workflow's steps against a Ready cache) — beside a no-op
//! server on the same stack, measured the same way in the same run. The targets (DESIGN.md,
//! issue "at the limit"): p99 under 1 ms at 2,000 requests/s, and throughput at least 80% of the
//! no-op server's (CPU per request at most 1.25 times its).
//!
//! A bench target without criterion's harness: `cargo bench --bench admission_load` builds it in
//! release and runs it. CI only compiles it (clippy `--all-targets`); `cargo test --benches` runs
//! it without `--bench`, which checks each server's answers and measures nothing.
//! Options after `--` (e.g. `-- --rate 4000 --duration 20 --routes /mutate`); `--help` lists
//! them.

mod fixture;
mod load;
mod noop;
mod servers;

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use ocifit_testkit::pki::{CertificateAuthority, install_crypto_provider};

use load::Measured;
use ocifit::admission::tls::ServingCert;
use servers::{NOOP, Server};

// The allocator `ocifit` itself runs with (src/main.rs), so the server measured here allocates
// as the shipped one does.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Load test of ocifit's admission webhook against a no-op server.
#[derive(Parser, Debug)]
struct Args {
    /// Requests per second in the fixed-rate run.
    #[arg(long, default_value_t = 2000.0)]
    rate: f64,
    /// Seconds of the measured fixed-rate run.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Seconds at the same rate before measuring (TLS sessions, caches, the planner's memo).
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Keep-alive connections (the apiserver keeps a pool per webhook).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Seconds of each closed-loop maximum-throughput run.
    #[arg(long, default_value_t = 5)]
    max_duration: u64,
    /// Slices of the fixed-rate run, and maximum-throughput runs, per server, alternating
    /// between the servers (fixed rate: merged; maximum throughput: the best counts).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Worker nodes in the cluster the policy is resolved over.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// ocifit's routes to measure beside the no-op, comma-separated (e.g. `/mutate` alone while
    /// profiling it); all of them when not given.
    #[arg(long, value_delimiter = ',')]
    routes: Vec<String>,
    /// Passed by `cargo bench`. Without it (`cargo test --benches`) the answers are checked
    /// and nothing is measured.
    #[arg(long, hide = true)]
    bench: bool,
}

/// The p99 latency at the fixed rate must stay under this.
const P99_TARGET: Duration = Duration::from_millis(1);
/// Each route's maximum throughput must be at least this share of the no-op server's.
const THROUGHPUT_TARGET: f64 = 0.8;
/// Each route's CPU per request may be at most this many times the no-op's.
const CPU_TARGET: f64 = 1.25;

fn main() -> Result<()> {
    let args = Args::parse();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(&args))
}

async fn run(args: &Args) -> Result<()> {
    install_crypto_provider();
    let ca = CertificateAuthority::new("admission load CA")?;
    let issued = ca.issue_server("webhook", &["127.0.0.1"])?;
    let cert = ServingCert::new();
    cert.set_pem(issued.cert_pem.as_bytes(), issued.key_pem.as_bytes())?;
    let servers = servers::start(args.nodes, &args.routes, ca.cert_pem(), cert)?;
    let result = check_and_measure(args, &servers).await;
    for server in &servers {
        server.handle.stop(true).await;
    }
    result
}

async fn check_and_measure(args: &Args, servers: &[Server]) -> Result<()> {
    for server in servers {
        let mut sender = server.target.connect().await?;
        for request in &server.requests {
            let answer = load::send(&mut sender, server.target.path, &request.body).await?;
            fixture::check(&answer, request.expect)
                .with_context(|| format!("{} answering {}", server.name, request.what))?;
        }
    }
    if !args.bench {
        println!("answers checked; `cargo bench --bench admission_load` measures");
        return Ok(());
    }
    println!(
        "admission over HTTPS on loopback: {} keep-alive connections, {} nodes; requests in turn:",
        args.connections, args.nodes,
    );
    for server in servers {
        let sent: Vec<String> = server
            .requests
            .iter()
            .map(|r| format!("{} ({:?})", r.what, r.expect))
            .collect();
        println!("  {}: {}", server.name, sent.join(", "));
    }
    // The servers and the generator share the machine's cores with whatever else runs: the
    // load average says how much that was.
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let cores = std::thread::available_parallelism().map_or(0, usize::from);
        println!(
            "{cores} cores; load average before the run: {}",
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    for server in servers {
        load::fixed_rate(
            &server.target,
            &server.bodies(),
            args.connections,
            args.rate,
            Duration::from_secs(args.warmup),
        )
        .await
        .with_context(|| format!("warming up {}", server.name))?;
    }
    // Each server's fixed-rate time is cut into `rounds` slices taken in turn, so a change in
    // what else the machine runs falls on all alike.
    let slice = Duration::from_secs(args.duration) / u32::try_from(args.rounds.max(1))?;
    let mut fixed: Vec<(&str, Option<Measured>)> =
        servers.iter().map(|server| (server.name, None)).collect();
    for _ in 0..args.rounds.max(1) {
        for (server, (_, kept)) in servers.iter().zip(fixed.iter_mut()) {
            let measured = load::fixed_rate(
                &server.target,
                &server.bodies(),
                args.connections,
                args.rate,
                slice,
            )
            .await
            .with_context(|| format!("fixed rate against {}", server.name))?;
            match kept {
                Some(kept) => kept.merge(&measured)?,
                None => *kept = Some(measured),
            }
        }
    }
    let fixed: Vec<(&str, Measured)> = fixed
        .into_iter()
        .filter_map(|(name, measured)| Some((name, measured?)))
        .collect();
    println!(
        "\nfixed rate {} req/s for {} s in {} slices (open loop; latency from each request's \
         due time):",
        args.rate, args.duration, args.rounds
    );
    print_table(&fixed);

    let mut best: Vec<(&str, Option<Measured>)> =
        servers.iter().map(|server| (server.name, None)).collect();
    for _ in 0..args.rounds.max(1) {
        for (server, (_, kept)) in servers.iter().zip(best.iter_mut()) {
            let measured = load::max_throughput(
                &server.target,
                &server.bodies(),
                args.connections,
                Duration::from_secs(args.max_duration),
            )
            .await
            .with_context(|| format!("maximum throughput of {}", server.name))?;
            if kept
                .as_ref()
                .is_none_or(|kept| measured.throughput() > kept.throughput())
            {
                *kept = Some(measured);
            }
        }
    }
    let best: Vec<(&str, Measured)> = best
        .into_iter()
        .filter_map(|(name, measured)| Some((name, measured?)))
        .collect();
    println!(
        "\nmaximum throughput (closed loop, {} s per run, best of {}; latency from send):",
        args.max_duration, args.rounds
    );
    print_table(&best);
    verdicts(args, &fixed, &best);
    Ok(())
}

/// Each route's figures against the targets.
fn verdicts(args: &Args, fixed: &[(&str, Measured)], best: &[(&str, Measured)]) {
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    let Some((_, noop)) = best.iter().find(|(name, _)| *name == NOOP) else {
        return;
    };
    println!("\ntargets:");
    for (name, measured) in best.iter().filter(|(name, _)| *name != NOOP) {
        println!("  {name}:");
        if let Some((_, at_rate)) = fixed.iter().find(|(row, _)| row == name) {
            let p99 = Duration::from_micros(at_rate.latencies.value_at_quantile(0.99));
            println!(
                "    p99 at {} req/s: {} µs, target under {} µs: {}",
                args.rate,
                p99.as_micros(),
                P99_TARGET.as_micros(),
                met(p99 < P99_TARGET && at_rate.errors == 0)
            );
        }
        let ratio = measured.throughput() / noop.throughput();
        println!(
            "    maximum throughput: {:.0} req/s, {:.0}% of the no-op server's {:.0}, target at \
             least {:.0}%: {}",
            measured.throughput(),
            ratio * 100.0,
            noop.throughput(),
            THROUGHPUT_TARGET * 100.0,
            met(ratio >= THROUGHPUT_TARGET)
        );
        if let (Some(cpu), Some(noop_cpu)) = (measured.cpu_per_request(), noop.cpu_per_request()) {
            println!(
                "    CPU per request (generator and server): {cpu:.1} µs against the no-op's \
                 {noop_cpu:.1} µs, {:.2}×, target at most {CPU_TARGET}×: {}",
                cpu / noop_cpu,
                met(cpu <= CPU_TARGET * noop_cpu)
            );
        }
    }
}

fn print_table(rows: &[(&str, Measured)]) {
    println!(
        "  {:<16} {:>9} {:>7} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10}",
        "server",
        "answered",
        "errors",
        "req/s",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "CPU µs/req"
    );
    for (name, measured) in rows {
        let h = &measured.latencies;
        println!(
            "  {:<16} {:>9} {:>7} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10}",
            name,
            h.len(),
            measured.errors,
            measured.throughput(),
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.9),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.999),
            h.max(),
            measured
                .cpu_per_request()
                .map_or("?".to_owned(), |cpu| format!("{cpu:.1}"))
        );
    }
    for (name, measured) in rows {
        if let Some(lag) = &measured.lag {
            println!(
                "  {name}: the generator sent {}% of requests on time (within 100 µs of due); \
                 lag p99 {} µs, max {} µs",
                percent_within(lag, 100),
                lag.value_at_quantile(0.99),
                lag.max()
            );
        }
    }
}

/// The share of recorded values at most `bound`, in percent, one decimal.
fn percent_within(histogram: &hdrhistogram::Histogram<u64>, bound: u64) -> f64 {
    let within: u64 = histogram
        .iter_recorded()
        .filter(|value| value.value_iterated_to() <= bound)
        .map(|value| value.count_at_value())
        .sum();
    (1000.0 * within as f64 / histogram.len().max(1) as f64).round() / 10.0
}
