//! Which text `/metrics` answers with, and the Prometheus text form of the metrics library's
//! output. The library writes OpenMetrics only; Prometheus asks for OpenMetrics first and gets
//! it, while `curl … | promtool check metrics`, older Prometheus servers and most other scrapers
//! read the Prometheus text format 0.0.4. Like Prometheus's own Go client, OpenMetrics is served
//! only to a client that asks for it; anyone else gets the 0.0.4 text.

/// A text exposition format, with the content type that names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    OpenMetrics,
    PrometheusText,
}

impl Format {
    /// The `Content-Type` of a body in this format.
    pub(crate) const fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format to answer a request whose `Accept` header is `accept`: the one of the two
    /// the client prefers (by `q`, then by order), OpenMetrics only when it names it; without
    /// an `Accept`, or with only `*/*`, the 0.0.4 text, as Prometheus's Go client answers.
    pub(crate) fn negotiate(accept: Option<&str>) -> Format {
        let mut best: Option<(f32, Format)> = None;
        for range in accept.unwrap_or_default().split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let format = match media.as_str() {
                "application/openmetrics-text" => Format::OpenMetrics,
                "text/plain" => Format::PrometheusText,
                _ => continue,
            };
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(key, _)| key.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, value)| value.trim().parse::<f32>().ok());
            match q {
                Some(q) if q > 0.0 && best.is_none_or(|(b, _)| q > b) => best = Some((q, format)),
                _ => {}
            }
        }
        best.map_or(Format::PrometheusText, |(_, format)| format)
    }
}

/// The OpenMetrics exposition could not be written as Prometheus text: it holds something the
/// 0.0.4 format has no word for (the caller then serves the OpenMetrics).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the OpenMetrics line {line:?} has no Prometheus text 0.0.4 form")]
pub(crate) struct Untranslatable {
    pub line: String,
}

/// `openmetrics` (as the library writes it) in the Prometheus text format 0.0.4: counters'
/// `# HELP`/`# TYPE` name `…_total`, `unknown` is `untyped`, `# UNIT` and `# EOF` go; exemplars,
/// `_created` samples and the types ocifit never writes are refused.
pub(crate) fn prometheus_text(openmetrics: &str) -> Result<String, Untranslatable> {
    let untranslatable = |line: &str| Untranslatable {
        line: line.to_owned(),
    };
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 8 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or_else(|| untranslatable(line))?;
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), kind),
                "gauge" | "histogram" | "summary" => (name.to_owned(), kind),
                "unknown" => (name.to_owned(), "untyped"),
                _ => return Err(untranslatable(line)),
            };
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let suffix = if counters.contains(&name) {
                "_total"
            } else {
                ""
            };
            out.push_str(&format!("# HELP {name}{suffix} {help}\n"));
            continue;
        }
        if line.starts_with('#') || line.contains(" # ") || sample_name(line).ends_with("_created")
        {
            return Err(untranslatable(line));
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// A sample line's metric name.
fn sample_name(line: &str) -> &str {
    line.split(['{', ' ']).next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMETHEUS_3: &str = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,\
        application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,\
        text/plain;version=0.0.4;q=0.3,*/*;q=0.2";

    #[test]
    fn openmetrics_goes_to_whoever_prefers_it_and_the_text_format_to_everyone_else() {
        for (accept, format) in [
            (Some(PROMETHEUS_3), Format::OpenMetrics),
            (
                Some("application/openmetrics-text; version=1.0.0"),
                Format::OpenMetrics,
            ),
            (
                Some("text/plain;q=0.9, application/openmetrics-text;q=0.5"),
                Format::PrometheusText,
            ),
            (Some("text/plain;version=0.0.4"), Format::PrometheusText),
            (Some("*/*"), Format::PrometheusText),
            (
                Some("application/openmetrics-text;q=0, text/plain"),
                Format::PrometheusText,
            ),
            (Some("application/json"), Format::PrometheusText),
            (
                Some("application/openmetrics-text;q=nonsense"),
                Format::PrometheusText,
            ),
            (None, Format::PrometheusText),
        ] {
            assert_eq!(Format::negotiate(accept), format, "{accept:?}");
        }
    }

    #[test]
    fn counters_are_declared_with_their_total_suffix_and_the_eof_goes() {
        let openmetrics = "# HELP ocifit_events Events published.\n# TYPE ocifit_events counter\n\
            ocifit_events_total 3\n# HELP ocifit_leader 1 while leading.\n# TYPE ocifit_leader gauge\n\
            ocifit_leader 1\n# HELP x_seconds A histogram.\n# TYPE x_seconds histogram\n\
            x_seconds_bucket{le=\"+Inf\"} 1\nx_seconds_sum 0.5\nx_seconds_count 1\n# EOF\n";
        assert_eq!(
            prometheus_text(openmetrics).unwrap(),
            "# HELP ocifit_events_total Events published.\n# TYPE ocifit_events_total counter\n\
            ocifit_events_total 3\n# HELP ocifit_leader 1 while leading.\n# TYPE ocifit_leader gauge\n\
            ocifit_leader 1\n# HELP x_seconds A histogram.\n# TYPE x_seconds histogram\n\
            x_seconds_bucket{le=\"+Inf\"} 1\nx_seconds_sum 0.5\nx_seconds_count 1\n"
        );
    }

    #[test]
    fn what_the_text_format_cannot_say_is_refused_not_dropped() {
        for line in [
            "# TYPE build info",
            "x_total 1 # {trace_id=\"a\"} 1",
            "x_created 1700000000",
        ] {
            let text = format!("# HELP x X.\n# TYPE x counter\n{line}\n# EOF\n");
            assert_eq!(
                prometheus_text(&text),
                Err(Untranslatable {
                    line: line.to_owned()
                })
            );
        }
    }
}
