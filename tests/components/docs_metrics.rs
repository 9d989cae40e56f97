//! `docs/metrics.md` lists every metric `ocifit run` serves, with its type: the names are read
//! from the process's own metrics (the registered ones from their catalogue, since a family
//! without a sample writes nothing; those read at scrape time from the exposition), so a metric
//! registered without its row, or a row left after its metric went, fails here.

use std::collections::BTreeMap;
use std::sync::Arc;

use ocifit::image_selection::controller::registry_source::RegistrySource;
use ocifit::registry::RegistryOptions;

/// Metric name → type, as a scrape shows them (counters with their `_total` suffix).
fn served() -> BTreeMap<String, String> {
    let source =
        Arc::new(RegistrySource::new(RegistryOptions::default()).expect("a registry client"));
    let metrics = ocifit::startup::process_metrics(&source);
    let text = metrics.encode().expect("the exposition");
    let mut served: BTreeMap<String, String> = metrics.catalogue().iter().cloned().collect();
    let scraped = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(|rest| {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
            let name = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_owned()
            };
            (name, kind.to_owned())
        });
    served.extend(scraped);
    served
}

/// The rows of the table in `docs/metrics.md`: `` | `name` | type | … ``.
fn documented() -> BTreeMap<String, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md");
    let docs = std::fs::read_to_string(path).expect("docs/metrics.md");
    docs.lines()
        .filter(|line| line.starts_with("| `ocifit_"))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let name = cells[0].trim_start_matches("| `").trim_end_matches('`');
            (
                name.to_owned(),
                cells.get(1).copied().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_metric_served_has_its_row_with_its_type_and_every_row_a_metric() {
    let served = served();
    assert!(
        served.contains_key("ocifit_admissions_total") && served.len() > 20,
        "the exposition lists the registered metrics: {served:?}"
    );
    let documented = documented();
    let missing: Vec<_> = served
        .iter()
        .filter(|(name, _)| !documented.contains_key(*name))
        .map(|(name, kind)| format!("{name} ({kind})"))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/metrics.md has no row for {missing:?}: add `| `NAME` | TYPE | labels and meaning |`"
    );
    let gone: Vec<_> = documented
        .keys()
        .filter(|name| !served.contains_key(*name))
        .collect();
    assert!(
        gone.is_empty(),
        "docs/metrics.md lists metrics ocifit does not serve: {gone:?}"
    );
    for (name, kind) in &served {
        assert_eq!(
            &documented[name], kind,
            "the type of {name} in docs/metrics.md"
        );
    }
}

#[test]
fn the_events_metric_help_says_it_counts_every_event_not_only_policies() {
    let source =
        Arc::new(RegistrySource::new(RegistryOptions::default()).expect("a registry client"));
    let text = ocifit::startup::process_metrics(&source)
        .encode()
        .expect("the exposition");
    let help = text
        .lines()
        .find_map(|line| line.strip_prefix("# HELP ocifit_events "))
        .expect("the help of ocifit_events");
    assert!(
        help.contains("gated pods") && help.contains("artifact caches"),
        "Events on gated pods and artifact caches count too: {help}"
    );
}
