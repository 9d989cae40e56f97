//! ocifit at scale on the test kit's real control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kwok), `ocifit run` being the binary this bench
//! builds: the run in `tests/cluster/support/scale.rs` at the sizes of the environment variables
//! `OCIFIT_SCALE_NODES`, `_POLICIES`, `_OPTED_IN`, `_GATED`, `_RATE`, `_REPLICAS`, `_STEPS`
//! (defaults: 5,000 nodes, 100 policies of each kind, 20,000 + 20,000 pods at 200 pods/s, a
//! Deployment of 500, 2,000 workflow steps of an ArtifactCache among the steady pods).
//! Prints the results table and writes `docs/cluster-scale.svg` (ocifit's RSS and CPU over the
//! run) from its own samples. `cargo bench --bench cluster_scale`; without `--bench` (`cargo test
//! --benches`) a few pods check that the path works and nothing is written.

use std::path::Path;

use ocifit_cluster_tests::scale::{Report, Sizes, run};

/// The plot: ocifit's RSS (MiB, left scale) and CPU (% of a core over each interval, right
/// scale) against seconds into the run.
fn svg(report: &Report) -> String {
    let (width, height, margin) = (640.0, 320.0, 48.0);
    let samples = &report.samples;
    let end = samples.last().map_or(1.0, |s| s.at.max(1.0));
    let rss: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| (s.at, s.rss_bytes as f64 / 1048576.0))
        .collect();
    let cpu: Vec<(f64, f64)> = samples
        .windows(2)
        .map(|w| {
            let dt = (w[1].at - w[0].at).max(1e-3);
            (w[1].at, (w[1].ocifit_cpu - w[0].ocifit_cpu) / dt * 100.0)
        })
        .collect();
    let top = |points: &[(f64, f64)]| points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let (rss_top, cpu_top) = (top(&rss), top(&cpu));
    let line = |points: &[(f64, f64)], max: f64, colour: &str| {
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| {
                let px = margin + x / end * (width - 2.0 * margin);
                let py = height - margin - y / max * (height - 2.0 * margin);
                format!("{px:.1},{py:.1}")
            })
            .collect();
        format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>",
            path.join(" ")
        )
    };
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{margin}\" y=\"20\">ocifit over the scale run ({} nodes, {} pods): \
         RSS (blue, 0–{rss_top:.0} MiB) and CPU (red, 0–{cpu_top:.0}% of a core)</text>\n\
         <line x1=\"{margin}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"black\"/>\n\
         <text x=\"{margin}\" y=\"{yl}\">0 s</text><text x=\"{xl}\" y=\"{yl}\">{end:.0} s</text>\n\
         {}\n{}\n</svg>\n",
        report.sizes.nodes,
        report.sizes.opted_in + report.sizes.gated,
        line(&rss, rss_top, "#1f5fbf"),
        line(&cpu, cpu_top, "#bf1f1f"),
        y0 = height - margin,
        x1 = width - margin,
        yl = height - margin + 16.0,
        xl = width - margin - 24.0,
    )
}

#[tokio::main]
async fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let default = if bench {
        Sizes {
            nodes: 5000,
            policies: 100,
            opted_in: 20_000,
            gated: 20_000,
            rate: 200,
            replicas: 500,
            steps: 2_000,
        }
    } else {
        Sizes {
            nodes: 6,
            policies: 2,
            opted_in: 4,
            gated: 4,
            rate: 10,
            replicas: 2,
            steps: 2,
        }
    };
    let report = run(
        Path::new(env!("CARGO_BIN_EXE_ocifit")),
        Sizes::from_env(default),
    )
    .await;
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "ocifit at scale ({cores} cores, load average at the end {}):\n{}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        report.table()
    );
    assert_eq!(report.failed_admissions, 0, "failed admissions");
    assert!(report.unreleased.is_empty(), "pods never released");
    assert!(report.uninjected.is_empty(), "step pods not injected");
    if bench {
        let path = ocifit_testkit::repo_root().join("docs/cluster-scale.svg");
        std::fs::write(&path, svg(&report)).expect("the plot written");
        println!("plot: {}", path.display());
    }
}
