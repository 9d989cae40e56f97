//! Which registry addresses ocifit asks: a registry whose name is, or resolves to, an address
//! inside the cluster's or the node's own network is refused unless private addresses are
//! allowed (inspection's `private_addresses`, artifact sources' own check).

use super::error::{Error, Refusal};
use super::reference::{self, Reference};

/// Refuses `image`'s registry when its name is, or resolves to, an address that is not public.
/// A name that does not resolve is left to the request itself to fail.
pub async fn refuse_private(image: &Reference) -> Result<(), Error> {
    let host = reference::api_host(image);
    let has_port = !host.ends_with(']')
        && host
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok());
    let authority = if has_port {
        host.to_owned()
    } else {
        format!("{host}:443")
    };
    let Ok(addresses) = tokio::net::lookup_host(authority).await else {
        return Ok(());
    };
    let mut addresses = addresses;
    if addresses.any(|address| not_public(address.ip())) {
        return Err(Error::NotAllowed {
            target: reference::target(image),
            host: host.to_owned(),
            why: Refusal::PrivateAddress,
        });
    }
    Ok(())
}

/// Private (RFC 1918, unique local), loopback, link-local, shared (100.64/10), unspecified or
/// broadcast: an address inside the cluster's or the node's own network.
fn not_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let [first, second, ..] = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || first == 0
                || (first == 100 && (second & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| not_public(IpAddr::V4(v4)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_and_link_local_addresses_are_not_public_and_others_are() {
        for address in [
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(not_public(address.parse().unwrap()), "{address}");
        }
        for address in [
            "93.184.216.34",
            "192.0.2.2",
            "2606:4700::1111",
            "100.128.0.1",
        ] {
            assert!(!not_public(address.parse().unwrap()), "{address}");
        }
    }
}
