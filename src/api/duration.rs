//! Durations as the CRDs spell them (`7d`, `1d12h`, `10m`, `1h30m`, `1.5s`, `250ms`), shared by
//! every feature whose API has one and by the flags of `ocifit run`, so they read the same text
//! the same way. The apiserver validates a CRD's duration with [`DURATION_PATTERN`] and ocifit
//! parses it with [`parse_duration`]: both accept exactly the same texts (a test walks one table
//! through both). Go's `time.ParseDuration` spelling (what CEL's `duration()` reads) plus a
//! leading day count; jiff's friendly format is not used, as it also takes words, spaces and
//! signs and refuses repeated units and fractions of days.

use std::time::Duration;

/// The CRDs' pattern for a duration: a day count first, or not at all, then numbers with a unit
/// each (`ms`, `s`, `m`, `h`); every number may have a fraction.
pub const DURATION_PATTERN: &str =
    r"^([0-9]+(\.[0-9]+)?d([0-9]+(\.[0-9]+)?(ms|s|m|h))*|([0-9]+(\.[0-9]+)?(ms|s|m|h))+)$";

const SECONDS_PER_DAY: f64 = 86_400.0;

/// Parses a duration as the CRD spells it (`7d`, `1d12h`, `10m`, `1h30m`, `1.5s`, `250ms`;
/// validated by the apiserver). `None` when it does not parse, or is too long to represent.
pub fn parse_duration(text: &str) -> Option<Duration> {
    if text.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    let mut first = true;
    while !rest.is_empty() {
        let (value, tail) = number(rest)?;
        let (unit, tail) = if let Some(t) = tail.strip_prefix("ms") {
            (0.001, t)
        } else if let Some(t) = tail.strip_prefix('s') {
            (1.0, t)
        } else if let Some(t) = tail.strip_prefix('m') {
            (60.0, t)
        } else if let Some(t) = tail.strip_prefix('h') {
            (3600.0, t)
        } else if let Some(t) = tail.strip_prefix('d').filter(|_| first) {
            (SECONDS_PER_DAY, t)
        } else {
            return None;
        };
        total = total.checked_add(Duration::try_from_secs_f64(value * unit).ok()?)?;
        rest = tail;
        first = false;
    }
    Some(total)
}

/// The number `text` starts with (`[0-9]+(\.[0-9]+)?`) and what follows it.
fn number(text: &str) -> Option<(f64, &str)> {
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let whole = digits(text);
    if whole == 0 {
        return None;
    }
    let mut end = whole;
    if let Some(fraction) = text[whole..].strip_prefix('.') {
        let places = digits(fraction);
        if places == 0 {
            return None;
        }
        end += 1 + places;
    }
    let (number, tail) = text.split_at(end);
    Some((number.parse().ok()?, tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text with what it means; `None`: refused.
    const TABLE: &[(&str, Option<Duration>)] = &[
        ("10m", Some(Duration::from_secs(600))),
        ("1h30m", Some(Duration::from_secs(5400))),
        ("1.5s", Some(Duration::from_millis(1500))),
        ("250ms", Some(Duration::from_millis(250))),
        ("10s", Some(Duration::from_secs(10))),
        ("0s", Some(Duration::ZERO)),
        ("1h1h", Some(Duration::from_secs(7200))),
        ("30m1h", Some(Duration::from_secs(5400))),
        ("7d", Some(Duration::from_secs(7 * 86_400))),
        ("1d12h", Some(Duration::from_secs(36 * 3600))),
        ("1.5d", Some(Duration::from_secs(36 * 3600))),
        ("2d30m15s", Some(Duration::from_secs(2 * 86_400 + 1815))),
        ("0d", Some(Duration::ZERO)),
        ("", None),
        ("10", None),
        ("m", None),
        ("d", None),
        ("1h-5m", None),
        ("1..5s", None),
        (".5s", None),
        ("5.s", None),
        ("-5s", None),
        ("+5s", None),
        ("1e3s", None),
        ("5 m", None),
        (" 5m", None),
        ("5m ", None),
        ("5M", None),
        ("5us", None),
        ("5ns", None),
        ("1w", None),
        ("1day", None),
        ("12h1d", None),
        ("1d1d", None),
        ("1d12", None),
        ("7d\n", None),
    ];

    #[test]
    fn the_crd_pattern_and_the_parser_accept_exactly_the_same_texts() {
        let pattern = regex::Regex::new(DURATION_PATTERN).unwrap();
        for (text, expected) in TABLE {
            assert_eq!(parse_duration(text), *expected, "{text:?}");
            assert_eq!(pattern.is_match(text), expected.is_some(), "{text:?}");
        }
    }

    #[test]
    fn a_duration_too_long_to_represent_is_refused() {
        assert_eq!(parse_duration("99999999999999999999999d"), None);
    }
}
