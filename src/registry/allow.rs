//! Which registry hosts the client may reach (`--allowed-registries`), and which token realms and
//! redirect targets it may follow. Pure: no I/O.
//!
//! A pattern is `HOST[:PORT]` (exact, case-insensitive) or `*.DOMAIN[:PORT]` (any name below
//! `DOMAIN`, not `DOMAIN` itself). Ports must be equal, absent included, as the kubelet matches
//! credentials: `registry.local` does not allow `registry.local:5000`. An empty list allows every
//! host. The list applies to every request: artifact references, candidate images, the images a
//! set names, token realms on another host, and redirects.

use reqwest::Url;

use super::error::ConfigError;

/// The registry hosts the client may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    patterns: Vec<Pattern>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    /// Lower-cased; for a wildcard, the domain after `*.`.
    host: String,
    wildcard: bool,
    port: Option<u16>,
}

impl AllowList {
    /// Parses patterns; an empty list allows every host.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<AllowList, ConfigError> {
        let patterns = patterns
            .iter()
            .map(|p| Pattern::parse(p.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(AllowList { patterns })
    }

    /// True when every host is allowed.
    pub fn allows_any(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `host` (`name[:port]`, as references spell registries) may be reached.
    pub fn allows(&self, host: &str) -> bool {
        self.patterns.is_empty() || self.lists(host)
    }

    /// Whether a pattern matches `host` (`name[:port]`); an empty list matches nothing.
    pub(crate) fn lists(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        self.patterns
            .iter()
            .any(|p| p.port == port && p.matches_name(&name))
    }

    /// Whether a pattern matches the name `name`, whatever port it names.
    pub(crate) fn lists_name(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        self.patterns.iter().any(|p| p.matches_name(&name))
    }

    /// The patterns of both lists.
    pub(crate) fn and(mut self, other: &AllowList) -> AllowList {
        self.patterns.extend(other.patterns.iter().cloned());
        self
    }
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, ConfigError> {
        let invalid = |why: &str| ConfigError::AllowedRegistry {
            pattern: text.to_string(),
            reason: why.to_string(),
        };
        let trimmed = text.trim();
        let (wildcard, rest) = match trimmed.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        if rest.contains(['/', '*', '@']) || rest.chars().any(char::is_whitespace) {
            return Err(invalid(
                "expected HOST[:PORT] or *.DOMAIN[:PORT], without scheme or path",
            ));
        }
        let (host, port) = split_host(rest).ok_or_else(|| invalid("the port is not a number"))?;
        if host.is_empty() {
            return Err(invalid("the host is empty"));
        }
        Ok(Pattern {
            host,
            wildcard,
            port,
        })
    }

    fn matches_name(&self, name: &str) -> bool {
        if self.wildcard {
            name.strip_suffix(self.host.as_str())
                .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
        } else {
            name == self.host
        }
    }
}

/// `name[:port]` lower-cased, with the port parsed; `[v6]:port` keeps its brackets.
fn split_host(host: &str) -> Option<(String, Option<u16>)> {
    let host = host.to_ascii_lowercase();
    let colon = match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => i,
        _ => return Some((host, None)),
    };
    let port = host[colon + 1..].parse().ok()?;
    Some((host[..colon].to_string(), Some(port)))
}

/// A URL's host as references spell it: `name` or `name:port` when the URL names a port.
pub(crate) fn url_host(url: &Url) -> Option<String> {
    // `host_str` keeps an IPv6 address's brackets, as references write it.
    let name = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("{name}:{port}"),
        None => name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(patterns: &[&str]) -> AllowList {
        AllowList::parse(patterns).unwrap()
    }

    #[test]
    fn an_empty_list_allows_every_host() {
        assert!(list(&[]).allows("anything.example:1234"));
        assert!(list(&[]).allows_any());
    }

    #[test]
    fn exact_hosts_match_case_insensitively_with_equal_ports() {
        let allowed = list(&["Registry.Example.com", "127.0.0.1:5000"]);
        assert!(allowed.allows("registry.example.com"));
        assert!(allowed.allows("REGISTRY.example.COM"));
        assert!(allowed.allows("127.0.0.1:5000"));
        assert!(!allowed.allows("registry.example.com:5000"));
        assert!(!allowed.allows("127.0.0.1"));
        assert!(!allowed.allows("127.0.0.1:5001"));
        assert!(!allowed.allows("evil.registry.example.com"));
        assert!(!allowed.allows("registry.example.com.evil"));
    }

    #[test]
    fn a_wildcard_matches_names_below_the_domain_only() {
        let allowed = list(&["*.example.com"]);
        assert!(allowed.allows("a.example.com"));
        assert!(allowed.allows("a.b.example.com"));
        assert!(!allowed.allows("example.com"));
        assert!(!allowed.allows("badexample.com"));
        assert!(!allowed.allows("a.example.com:443"));
    }

    #[test]
    fn patterns_with_a_scheme_path_or_bad_port_are_refused_naming_the_pattern() {
        for bad in [
            "https://r.example.com",
            "r.example.com/acme",
            "r.example.com:http",
            "",
            "*.",
            "a*.example.com",
        ] {
            let err = AllowList::parse(&[bad]).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn urls_are_matched_by_host_and_the_port_they_name() {
        let allowed = list(&["auth.example.com", "127.0.0.1:5000", "[::1]:5000"]);
        let url = |s: &str| Url::parse(s).unwrap();
        let allows = |u: &str| allowed.allows(&url_host(&url(u)).unwrap());
        assert!(allows("https://auth.example.com/token"));
        assert!(allows("https://auth.example.com:443/token"));
        assert!(!allows("https://auth.example.com:8443/token"));
        assert!(allows("http://127.0.0.1:5000/v2/"));
        assert!(allows("http://[::1]:5000/v2/"));
        assert!(!allows("https://other.example.com/"));
    }
}
