//! `docs/metrics.md`'s table of every metric `ocifit run` serves is generated from the process's
//! own metrics: name, type and help, the registered ones from their catalogue (a scrape leaves out
//! a family without a sample), those read at scrape time (`process_*`, the registry client's, the
//! allocator's) from the exposition. A metric added, renamed or re-described without the table
//! following fails here; `OCIFIT_REGENERATE=1` rewrites the table instead.

use std::sync::Arc;

use ocifit::image_selection::RegistrySource;
use ocifit::registry::RegistryOptions;

/// Set, the test rewrites the table rather than failing (as the chart's generated files).
const REGENERATE: &str = "OCIFIT_REGENERATE";

const BEGIN: &str = "<!-- The table is generated from the code by tests/components/docs_metrics.rs; do not edit. -->\n";
const END: &str = "\n<!-- End of the generated table. -->";

/// (name as a scrape shows it, type, help) of every metric served, registered ones first.
fn served() -> Vec<(String, String, String)> {
    let source =
        Arc::new(RegistrySource::new(RegistryOptions::default()).expect("a registry client"));
    let metrics = ocifit::startup::process_metrics(&source);
    let text = metrics.encode().expect("the exposition");
    let mut served: Vec<(String, String, String)> = metrics.catalogue().to_vec();
    let mut help = "";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').map_or("", |(_, help)| help);
        }
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
        let name = if kind == "counter" {
            format!("{name}_total")
        } else {
            name.to_owned()
        };
        if !served.iter().any(|(known, _, _)| *known == name) {
            let help = help.strip_suffix('.').unwrap_or(help);
            served.push((name, kind.to_owned(), help.to_owned()));
        }
    }
    served
}

/// The table as the code describes it.
fn table(served: &[(String, String, String)]) -> String {
    let mut table = String::from("| metric | type | help |\n|---|---|---|");
    for (name, kind, help) in served {
        table.push_str(&format!(
            "\n| `{name}` | {kind} | {} |",
            help.replace('|', "\\|")
        ));
    }
    table
}

#[test]
fn the_table_of_metrics_is_the_one_the_code_generates() {
    let served = served();
    for name in [
        "ocifit_admissions_total",
        "ocifit_build_info",
        "ocifit_reconcile_duration_seconds",
        "ocifit_certificate_expiry_timestamp_seconds",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
        "ocifit_registry_requests_total",
        "ocifit_heap_resident_bytes",
    ] {
        assert!(
            served.iter().any(|(served, _, _)| served == name),
            "{name} is served: {served:?}"
        );
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md");
    let docs = std::fs::read_to_string(path).expect("docs/metrics.md");
    let (before, rest) = docs.split_once(BEGIN).expect("the table's opening comment");
    let (current, after) = rest.split_once(END).expect("the table's closing comment");
    let wanted = table(&served);
    if current != wanted && std::env::var_os(REGENERATE).is_some() {
        std::fs::write(path, format!("{before}{BEGIN}{wanted}{END}{after}")).expect("write");
        return;
    }
    assert!(
        current == wanted,
        "docs/metrics.md's table is not what the code serves; regenerate with: \
         {REGENERATE}=1 cargo test --test components docs_metrics\nwanted:\n{wanted}"
    );
}

#[test]
fn no_help_text_needs_escaping_in_either_text_format() {
    for (name, _, help) in served() {
        assert!(
            !help.contains(['\\', '\n', '"']),
            "{name}'s help would read differently as OpenMetrics and as Prometheus text: {help}"
        );
    }
}

#[test]
fn the_events_metric_help_says_it_counts_every_event_not_only_policies() {
    let help = served()
        .into_iter()
        .find(|(name, _, _)| name == "ocifit_events_total")
        .map(|(_, _, help)| help)
        .expect("the help of ocifit_events_total");
    assert!(
        help.contains("gated pods") && help.contains("artifact caches"),
        "Events on gated pods and artifact caches count too: {help}"
    );
}
