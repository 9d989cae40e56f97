//! Durations as the CRDs spell them (`10m`, `1h30m`, `1.5s`, `250ms`), shared by every feature
//! whose API has one, so they read the same text the same way.

use std::time::Duration;

/// Parses a duration as the CRD spells it (`10m`, `1h30m`, `1.5s`, `250ms`; validated by the
/// apiserver). `None` when it does not parse.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let value: f64 = number.parse().ok()?;
        let (unit, tail) = if let Some(t) = tail.strip_prefix("ms") {
            (0.001, t)
        } else if let Some(t) = tail.strip_prefix('s') {
            (1.0, t)
        } else if let Some(t) = tail.strip_prefix('m') {
            (60.0, t)
        } else if let Some(t) = tail.strip_prefix('h') {
            (3600.0, t)
        } else {
            return None;
        };
        total = total.checked_add(Duration::try_from_secs_f64(value * unit).ok()?)?;
        rest = tail;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_the_crd_spells_them() {
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        for bad in ["", "10", "m", "10d", "1h-5m", "1..5s"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
