//! Admission over HTTPS on loopback, end to end: ocifit's `POST /mutate` (its actix-web server
//! over rustls, the planner index built in process from the flavor example's policy status over
//! thousands of nodes) and, on the same server, placement's `POST /placement` (the gate, one
//! PlacementPolicy selecting every pod) beside a no-op server on the same stack, measured the
//! same way in the same run. DESIGN.md's targets: p99 under 1 ms at 2,000 requests/s, and throughput at least
//! 80% of the no-op server's.
//!
//! A bench target without criterion's harness: `cargo bench --bench admission_load` builds it in
//! release and runs it. CI only compiles it (clippy `--all-targets`); `cargo test --benches` runs
//! it without `--bench`, which checks each server's answers and measures nothing.
//! Options after `--` (e.g. `-- --rate 4000 --duration 20`); `--help` lists them.

mod fixture;
mod load;
mod noop;

use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Parser;
use ocifit_testkit::pki::{CertificateAuthority, install_crypto_provider};

use load::{Measured, Target};
use ocifit::admission::route::Route;
use ocifit::admission::server::{DEADLINE, Host, admission_server};
use ocifit::admission::tls::ServingCert;
use ocifit::image_selection::feed::SharedIndex;
use ocifit::image_selection::planner::Index;
use ocifit::image_selection::route::{MutatePods, PATH};
use ocifit::placement::admission::{self as gate, GatePods, UsablePolicies};
use ocifit::placement::policy::Policy;
use ocifit::telemetry::Metrics;

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
    /// Passed by `cargo bench`. Without it (`cargo test --benches`) the answers are checked
    /// and nothing is measured.
    #[arg(long, hide = true)]
    bench: bool,
}

/// The p99 latency at the fixed rate must stay under this.
const P99_TARGET: Duration = Duration::from_millis(1);
/// ocifit's maximum throughput must be at least this share of the no-op server's.
const THROUGHPUT_TARGET: f64 = 0.8;
/// The servers' names in the report.
const OCIFIT: &str = "ocifit";
const GATE: &str = "gate";
const NOOP: &str = "no-op";

fn main() -> Result<()> {
    let args = Args::parse();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(&args))
}

/// A server under load: its name in the report, where it is, and what it answers.
struct Server {
    name: &'static str,
    target: Target,
    handle: ServerHandle,
    /// Whose answers it gives.
    answers: Answers,
}

/// Whose answers a server gives, for checking them.
#[derive(Clone, Copy)]
enum Answers {
    /// The no-op's canned one.
    Canned,
    /// Image selection's.
    Mutate,
    /// Placement's gate.
    Gate,
}

async fn run(args: &Args) -> Result<()> {
    install_crypto_provider();
    let ca = CertificateAuthority::new("admission load CA")?;
    let issued = ca.issue_server("webhook", &["127.0.0.1"])?;
    let cert = ServingCert::new();
    cert.set_pem(issued.cert_pem.as_bytes(), issued.key_pem.as_bytes())?;

    let nodes = fixture::nodes(args.nodes)?;
    let policy = fixture::policy(&nodes)?;
    let index = SharedIndex::default();
    index.store(Index::over_inputs(std::slice::from_ref(&policy), &nodes));
    let mut bodies = Vec::new();
    for (file, _) in fixture::PODS {
        bodies.push(Bytes::from(fixture::review(file)?));
    }

    let (noop_address, noop) = noop::start(ServingCert::server_config(Arc::clone(&cert))?)?;
    let policies = UsablePolicies::default();
    policies.store(vec![Policy::compile(&ocifit::api::PlacementPolicy::new(
        "all",
        Default::default(),
    ))?]);
    let host = Host {
        routes: vec![
            Route::new(
                PATH,
                MutatePods {
                    index,
                    notices: None,
                },
            ),
            Route::new(
                gate::PATH,
                GatePods {
                    policies,
                    namespaces: kube::runtime::reflector::store::Writer::default().as_reader(),
                    own_namespace: "ocifit-system".to_owned(),
                },
            ),
        ],
        metrics: Metrics::new(None),
        deadline: DEADLINE,
        draining: Default::default(),
        client_ca: None,
    };
    let (server, ocifit_address) = admission_server(([127, 0, 0, 1], 0).into(), cert, host)?;
    let ocifit = server.handle();
    tokio::spawn(server);
    let servers = [
        Server {
            name: NOOP,
            target: Target::new(noop_address, ca.cert_pem(), "/mutate")?,
            handle: noop,
            answers: Answers::Canned,
        },
        Server {
            name: OCIFIT,
            target: Target::new(ocifit_address, ca.cert_pem(), PATH)?,
            handle: ocifit.clone(),
            answers: Answers::Mutate,
        },
        Server {
            name: GATE,
            target: Target::new(ocifit_address, ca.cert_pem(), gate::PATH)?,
            handle: ocifit,
            answers: Answers::Gate,
        },
    ];
    let result = check_and_measure(args, &servers, &bodies).await;
    for server in &servers {
        server.handle.stop(true).await;
    }
    result
}

async fn check_and_measure(args: &Args, servers: &[Server], bodies: &[Bytes]) -> Result<()> {
    for server in servers {
        let mut sender = server.target.connect().await?;
        for (body, (file, expect)) in bodies.iter().zip(fixture::PODS) {
            let expect = match server.answers {
                Answers::Mutate => expect,
                Answers::Canned => fixture::Expect::Unchanged,
                Answers::Gate => fixture::Expect::Gated,
            };
            let answer = load::send(&mut sender, server.target.path, body).await?;
            fixture::check(&answer, expect)
                .with_context(|| format!("{} answering example/pods/{file}", server.name))?;
        }
    }
    if !args.bench {
        println!("answers checked; `cargo bench --bench admission_load` measures");
        return Ok(());
    }
    println!(
        "admission over HTTPS on loopback: {} keep-alive connections, {} nodes, requests in turn: \
         {}",
        args.connections,
        args.nodes,
        fixture::PODS
            .iter()
            .map(|(file, expect)| format!("example/pods/{file} ({expect:?})"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Both servers and the generator share the machine's cores with whatever else runs: the
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
    // Each server's fixed-rate time is cut into `rounds` slices taken in turn, so a change in
    // what else the machine runs falls on both alike.
    for server in servers {
        load::fixed_rate(
            &server.target,
            bodies,
            args.connections,
            args.rate,
            Duration::from_secs(args.warmup),
        )
        .await
        .with_context(|| format!("warming up {}", server.name))?;
    }
    let slice = Duration::from_secs(args.duration) / u32::try_from(args.rounds.max(1))?;
    let mut fixed: Vec<(&str, Option<Measured>)> =
        servers.iter().map(|server| (server.name, None)).collect();
    for _ in 0..args.rounds.max(1) {
        for (server, (_, kept)) in servers.iter().zip(fixed.iter_mut()) {
            let measured =
                load::fixed_rate(&server.target, bodies, args.connections, args.rate, slice)
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
    for _ in 0..args.rounds {
        for (server, (_, kept)) in servers.iter().zip(best.iter_mut()) {
            let measured = load::max_throughput(
                &server.target,
                bodies,
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

/// ocifit's figures against DESIGN.md's targets.
fn verdicts(args: &Args, fixed: &[(&str, Measured)], best: &[(&str, Measured)]) {
    let find = |rows: &[(&str, Measured)], name: &str| {
        rows.iter()
            .find(|(row, _)| *row == name)
            .map(|(_, measured)| measured.throughput())
    };
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    println!("\ntargets (DESIGN.md):");
    if let Some((_, measured)) = fixed.iter().find(|(name, _)| *name == OCIFIT) {
        let p99 = Duration::from_micros(measured.latencies.value_at_quantile(0.99));
        println!(
            "  p99 at {} req/s: {} µs, target under {} µs: {}",
            args.rate,
            p99.as_micros(),
            P99_TARGET.as_micros(),
            met(p99 < P99_TARGET && measured.errors == 0)
        );
    }
    if let Some((_, measured)) = fixed.iter().find(|(name, _)| *name == GATE) {
        println!(
            "  the gate (/placement) beside it: p99 {} µs at {} req/s, {} errors",
            measured.latencies.value_at_quantile(0.99),
            args.rate,
            measured.errors
        );
    }
    if let (Some(ocifit), Some(noop)) = (find(best, OCIFIT), find(best, NOOP)) {
        let ratio = ocifit / noop;
        println!(
            "  maximum throughput: {ocifit:.0} req/s, {:.0}% of the no-op server's {noop:.0}, \
             target at least {:.0}%: {}",
            ratio * 100.0,
            THROUGHPUT_TARGET * 100.0,
            met(ratio >= THROUGHPUT_TARGET)
        );
    }
    let cpu = |name| {
        best.iter()
            .find(|(row, _)| *row == name)
            .and_then(|(_, measured)| measured.cpu_per_request())
    };
    if let (Some(ocifit), Some(noop)) = (cpu(OCIFIT), cpu(NOOP)) {
        println!(
            "  CPU per request (generator and server): {ocifit:.0} µs against {noop:.0} µs, so on a \
             machine of its own ocifit would reach about {:.0}% of the no-op's throughput",
            100.0 * noop / ocifit
        );
    }
}

fn print_table(rows: &[(&str, Measured)]) {
    println!(
        "  {:<8} {:>9} {:>7} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10}",
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
            "  {:<8} {:>9} {:>7} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10}",
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
                .map_or("?".to_owned(), |cpu| format!("{cpu:.0}"))
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
