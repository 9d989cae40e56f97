//! The third figure per route: its own CPU per request, without TLS or HTTP. Each review is
//! read, planned and answered on this thread (`Route::answer`, what the host calls once a body
//! is in), in turn, for a fixed time; what a route costs beyond it under load is its I/O.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::fixture;
use crate::load::{cpu_since, cpu_time};
use crate::routes;

/// Each of ocifit's routes among `wanted` (all when empty) over `nodes` flavor nodes: (path,
/// CPU per request in µs), answering its requests in turn for `duration`.
pub fn own_cpu(nodes: usize, wanted: &[String], duration: Duration) -> Result<Vec<(String, f64)>> {
    let mut figures = Vec::new();
    for (route, (path, requests)) in routes::routes(nodes)?.iter().zip(routes::requests()?) {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == path) {
            continue;
        }
        for request in &requests {
            fixture::check(&route.answer(&request.body).body, request.expect)
                .with_context(|| format!("{path} answering {}", request.what))?;
        }
        let (started, before) = (Instant::now(), cpu_time());
        let mut answered = 0u64;
        while started.elapsed() < duration {
            for request in &requests {
                black_box(route.answer(black_box(&request.body)));
            }
            answered += requests.len() as u64;
        }
        let cpu = cpu_since(before).context("the process's CPU time is not readable")?;
        figures.push((
            path.to_owned(),
            cpu.all.as_secs_f64() * 1e6 / answered.max(1) as f64,
        ));
    }
    Ok(figures)
}
