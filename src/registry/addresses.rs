//! Which addresses are inside a network (the cluster's, the node's, a cloud's metadata service),
//! and the admin's list of the private registries ocifit may reach anyway
//! (`--allowed-private-registries`). The fence (`fence`) refuses by these at connect time.
//! Pure: no I/O.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;
use reqwest::Url;

use super::allow::{AllowList, url_host};
use super::error::{ConfigError, Refusal};
use super::reference::{self, Reference};

/// IPv4 ranges inside a network: `(network, prefix length)`.
const INTERNAL_V4: [(u32, u32); 9] = [
    (0x0000_0000, 8),  // 0/8: "this network", 0.0.0.0 included
    (0x0a00_0000, 8),  // 10/8: private
    (0x6440_0000, 10), // 100.64/10: shared (carrier-grade NAT)
    (0x7f00_0000, 8),  // 127/8: loopback
    (0xa9fe_0000, 16), // 169.254/16: link-local (cloud metadata)
    (0xac10_0000, 12), // 172.16/12: private
    (0xc0a8_0000, 16), // 192.168/16: private
    (0xe000_0000, 4),  // 224/4: multicast
    (0xf000_0000, 4),  // 240/4: reserved, 255.255.255.255 included
];

/// IPv6 ranges refused whatever they hold: `(network, prefix length)`.
const INTERNAL_V6: [(u128, u32); 6] = [
    (0xfc00 << 112, 7),                // fc00::/7: unique local
    (0xfe80 << 112, 10),               // fe80::/10: link-local
    (0xfec0 << 112, 10),               // fec0::/10: site-local
    (0xff00 << 112, 8),                // ff00::/8: multicast
    (0x2001_0000 << 96, 32),           // 2001::/32: Teredo (a tunnel to any IPv4 host)
    (0x0064_ff9b_0001_u128 << 80, 48), // 64:ff9b:1::/48: local-use NAT64 (RFC 8215)
];

/// IPv6 ranges whose last 32 bits are an IPv4 address: `(network, prefix length)`.
const EMBEDDING_V6: [(u128, u32); 4] = [
    (0, 96),                      // ::/96: IPv4-compatible (:: and ::1 included)
    (0xffff << 32, 96),           // ::ffff:0:0/96: IPv4-mapped
    (0xffff_0000 << 32, 96),      // ::ffff:0:0:0/96: IPv4-translated
    (0x0064_ff9b_u128 << 96, 96), // 64:ff9b::/96: NAT64
];

fn in_range(bits: u128, width: u32, (network, length): (u128, u32)) -> bool {
    let shift = width - length;
    bits >> shift == network >> shift
}

/// Whether `ip` is internal: private, loopback, link-local, shared, `0/8`, `240/4`, multicast,
/// unspecified or broadcast, or an IPv6 form that embeds such an IPv4 address or tunnels to any.
pub(super) fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_internal(v4),
        IpAddr::V6(v6) => v6_internal(v6),
    }
}

fn v4_internal(v4: Ipv4Addr) -> bool {
    let bits = u128::from(u32::from(v4));
    INTERNAL_V4
        .iter()
        .any(|&(network, length)| in_range(bits, 32, (u128::from(network), length)))
}

fn v6_internal(v6: Ipv6Addr) -> bool {
    let bits = u128::from(v6);
    if INTERNAL_V6.iter().any(|&range| in_range(bits, 128, range)) {
        return true;
    }
    // The embedded IPv4 address is the last 32 bits, or bits 16..48 for 6to4 (2002::/16).
    let embedded = if EMBEDDING_V6.iter().any(|&range| in_range(bits, 128, range)) {
        Some(bits as u32)
    } else if in_range(bits, 128, (0x2002 << 112, 16)) {
        Some((bits >> 80) as u32)
    } else {
        None
    };
    embedded.is_some_and(|v4| v4_internal(Ipv4Addr::from(v4)))
}

/// The private registries a client may reach: names (`HOST[:PORT]`, `*.DOMAIN[:PORT]`, as
/// `--allowed-registries` spells them), whatever they resolve to, and networks (CIDRs) whose
/// addresses may be connected to. Empty (the default): no internal address at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrivateRegistries {
    every: bool,
    hosts: AllowList,
    networks: Vec<IpNet>,
}

impl PrivateRegistries {
    /// Parses `HOST[:PORT]`, `*.DOMAIN[:PORT]` and `ADDRESS/PREFIX` entries.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<PrivateRegistries, ConfigError> {
        let mut hosts = Vec::new();
        let mut networks = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            if entry.contains('/') {
                let network =
                    entry
                        .parse::<IpNet>()
                        .map_err(|err| ConfigError::AllowedPrivate {
                            entry: entry.to_owned(),
                            reason: format!("not a CIDR ({err})"),
                        })?;
                networks.push(network.trunc());
            } else {
                hosts.push(entry);
            }
        }
        let hosts = AllowList::parse(&hosts).map_err(|err| match err {
            ConfigError::AllowedRegistry { pattern, reason } => ConfigError::AllowedPrivate {
                entry: pattern,
                reason: format!("{reason}, or ADDRESS/PREFIX"),
            },
            other => other,
        })?;
        Ok(PrivateRegistries {
            every: false,
            hosts,
            networks,
        })
    }

    /// Every internal address (the deprecated `--placement-allow-private-registries`).
    pub fn every() -> PrivateRegistries {
        PrivateRegistries {
            every: true,
            ..PrivateRegistries::default()
        }
    }

    /// Exactly the registries `references` name (the hosts serving their API), whatever they
    /// resolve to: for a client whose registries its caller chose, not an artifact or a pod.
    pub fn registries_of(references: &[&Reference]) -> PrivateRegistries {
        let hosts: Vec<&str> = references.iter().map(|r| reference::api_host(r)).collect();
        PrivateRegistries {
            // A reference's registry always parses as a host pattern; none allows nothing.
            hosts: AllowList::parse(&hosts).unwrap_or_default(),
            ..PrivateRegistries::default()
        }
    }

    /// This list and `other`'s.
    pub fn and(mut self, other: &PrivateRegistries) -> PrivateRegistries {
        self.every |= other.every;
        self.hosts = self.hosts.and(&other.hosts);
        self.networks.extend(other.networks.iter().copied());
        self
    }

    /// Whether a request may go to `url` before anything is resolved: an address in the URL is
    /// checked here (the HTTP client connects to it without asking the resolver); a name on the
    /// list with a port is allowed only on that port, since the resolver never sees the port.
    pub fn admits_url(&self, url: &Url) -> Result<(), Refusal> {
        if self.every {
            return Ok(());
        }
        let listed = || url_host(url).is_some_and(|host| self.hosts.lists(&host));
        let Some(host) = url.host_str() else {
            return Err(Refusal::PrivateAddress);
        };
        // The URL parser writes every address in one form: dotted IPv4, bracketed IPv6.
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        match literal.parse::<IpAddr>() {
            Ok(ip) if listed() || self.admits_address(ip) => Ok(()),
            Ok(_) => Err(Refusal::PrivateAddress),
            Err(_) if self.hosts.lists_name(host) && !listed() => Err(Refusal::PrivatePort),
            Err(_) => Ok(()),
        }
    }

    fn admits_address(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        !is_internal(ip) || self.networks.iter().any(|network| network.contains(&ip))
    }

    /// The addresses `name` resolved to that a connection may go to: all of them for a name on
    /// the list, else the public ones and those in a listed network. None left (or none found)
    /// is a refusal: the fence fails closed.
    pub fn admit_addresses(
        &self,
        name: &str,
        found: Vec<SocketAddr>,
    ) -> Result<Vec<SocketAddr>, Refusal> {
        let admitted: Vec<SocketAddr> = if self.every || self.hosts.lists_name(name) {
            found
        } else {
            found
                .into_iter()
                .filter(|address| self.admits_address(address.ip()))
                .collect()
        };
        if admitted.is_empty() {
            Err(Refusal::PrivateAddress)
        } else {
            Ok(admitted)
        }
    }
}

#[cfg(test)]
mod tests;
