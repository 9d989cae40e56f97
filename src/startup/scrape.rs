//! The registry client's counters as metrics, read at scrape time: requests by outcome, cache
//! hits and misses, and lookups by what they were for and their outcome.

use std::sync::Arc;

use prometheus_client::encoding::EncodeMetric;
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

use crate::image_selection::RegistrySource;
use crate::telemetry::ScrapeFn;

/// The scrape function for `source`'s counters.
pub fn registry_metrics(source: Arc<RegistrySource>) -> ScrapeFn {
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
