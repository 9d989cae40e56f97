//! What is read at scrape time: the registry client's counters (requests by outcome, cache hits
//! and misses, lookups by what they were for and their outcome) and the allocator's figures (the
//! bytes live allocations hold, and the pages the allocator holds for them).

use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::image_selection::RegistrySource;
use crate::telemetry::ScrapeFn;

/// The scrape function: `source`'s counters, then the allocator's figures.
pub(super) fn scraped(source: Arc<RegistrySource>) -> ScrapeFn {
    let registry = registry_metrics(source);
    Box::new(move |encoder| {
        registry(encoder)?;
        heap(encoder)
    })
}

/// jemalloc's figures (the process's allocator). Resident beyond live bytes is mostly pages partly
/// in use, which cannot be handed back (freed ones return as `.cargo/config.toml` sets). When its
/// statistics cannot be read the gauges are left out rather than written as 0.
fn heap(encoder: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    // The statistics are a snapshot taken when the epoch advances.
    let read = || -> Result<(usize, usize), tikv_jemalloc_ctl::Error> {
        tikv_jemalloc_ctl::epoch::advance()?;
        Ok((
            tikv_jemalloc_ctl::stats::allocated::read()?,
            tikv_jemalloc_ctl::stats::resident::read()?,
        ))
    };
    let Ok((allocated, resident)) = read() else {
        return Ok(());
    };
    for (name, help, value) in [
        (
            "heap_allocated_bytes",
            "Bytes held by the process's live allocations (jemalloc's stats.allocated)",
            allocated,
        ),
        (
            "heap_resident_bytes",
            "Bytes of physical memory the allocator holds: live allocations, the free room in pages they partly use, freed pages not yet returned, its own metadata (jemalloc's stats.resident)",
            resident,
        ),
    ] {
        let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
        gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
    }
    Ok(())
}

/// The scrape function for `source`'s counters.
fn registry_metrics(source: Arc<RegistrySource>) -> ScrapeFn {
    Box::new(move |encoder| {
        let stats = source.stats();
        let mut requests = encoder.encode_descriptor(
        "registry_requests",
        "HTTP requests made to registries, by outcome: the answer's status class (2xx, 3xx, 4xx, 5xx) or error (no answer)",
        None,
        MetricType::Counter,
    )?;
        for (outcome, value) in stats.outcomes.labelled() {
            ConstCounter::new(value).encode(requests.encode_family(&[("outcome", outcome)])?)?;
        }
        for (name, help, value) in [
            (
                "registry_content_cache_hits",
                "Manifests and blobs served from the cache (by digest)",
                stats.content.hits,
            ),
            (
                "registry_content_cache_misses",
                "Manifests and blobs fetched from a registry",
                stats.content.misses,
            ),
            (
                "registry_tag_cache_hits",
                "Tag resolutions served from the cache",
                stats.tags.hits,
            ),
            (
                "registry_tag_cache_misses",
                "Tag resolutions asked of a registry",
                stats.tags.misses,
            ),
        ] {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        let mut lookups = encoder.encode_descriptor(
        "registry_lookups",
        "Registry lookups by what they were for (artifact, platforms, candidate_artifact) and outcome (ok or the error kind)",
        None,
        MetricType::Counter,
    )?;
        for ((lookup, outcome), value) in source.outcomes() {
            let labels = [("lookup", lookup.as_str()), ("outcome", outcome)];
            ConstCounter::new(value).encode(lookups.encode_family(&labels)?)?;
        }
        Ok(())
    })
}
