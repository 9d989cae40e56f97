//! What each admission route costs the host's CPU per request beyond its I/O: the review read,
//! planned and answered (`Route::answer`, what the server calls once the body is in), without
//! TLS or HTTP, over the same fixtures and requests as `admission_load`. The load test says
//! whether a route meets its target; this says where a change moved its own share.

use std::hint::black_box;

use anyhow::Context;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "admission_load/fixture.rs"]
#[allow(
    dead_code,
    reason = "shared with admission_load, whose no-op expects Unchanged"
)]
mod fixture;
#[path = "admission_load/routes.rs"]
mod routes;

// The allocator `ocifit` runs with (src/main.rs), as in `admission_load`.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Worker nodes the example policy is resolved over, as `admission_load` defaults to.
const NODES: usize = 5000;

fn answers(c: &mut Criterion) {
    let prepared = routes::routes(NODES).and_then(|routes| Ok((routes, routes::requests()?)));
    let (routes, requests) = match prepared {
        Ok(prepared) => prepared,
        Err(err) => panic!("failed to prepare the routes: {err:#}"),
    };
    let mut group = c.benchmark_group("admission answer");
    for (route, (path, requests)) in routes.iter().zip(requests) {
        for request in &requests {
            let answer = route.answer(&request.body);
            if let Err(err) = fixture::check(&answer.body, request.expect)
                .with_context(|| format!("{path} answering {}", request.what))
            {
                panic!("{err:#}");
            }
        }
        group.throughput(Throughput::Elements(requests.len() as u64));
        group.bench_function(path, |b| {
            b.iter(|| {
                for request in &requests {
                    black_box(route.answer(black_box(&request.body)));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, answers);
criterion_main!(benches);
