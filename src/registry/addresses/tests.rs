use std::net::{IpAddr, SocketAddr};

use super::*;

fn internal(address: &str) -> bool {
    is_internal(address.parse::<IpAddr>().unwrap())
}

/// Each range by its first and last address inside and the addresses just outside.
fn assert_range(outside_below: &str, first: &str, last: &str, outside_above: &str) {
    assert!(!internal(outside_below), "{outside_below} is public");
    assert!(internal(first), "{first} is internal");
    assert!(internal(last), "{last} is internal");
    assert!(!internal(outside_above), "{outside_above} is public");
}

#[test]
fn each_ipv4_range_is_internal_from_its_first_to_its_last_address_and_no_further() {
    assert!(internal("0.0.0.0") && internal("0.255.255.255") && !internal("1.0.0.0"));
    assert_range("9.255.255.255", "10.0.0.0", "10.255.255.255", "11.0.0.0");
    assert_range(
        "100.63.255.255",
        "100.64.0.0",
        "100.127.255.255",
        "100.128.0.0",
    );
    assert_range(
        "126.255.255.255",
        "127.0.0.0",
        "127.255.255.255",
        "128.0.0.0",
    );
    assert_range(
        "169.253.255.255",
        "169.254.0.0",
        "169.254.255.255",
        "169.255.0.0",
    );
    assert_range(
        "172.15.255.255",
        "172.16.0.0",
        "172.31.255.255",
        "172.32.0.0",
    );
    assert_range(
        "192.167.255.255",
        "192.168.0.0",
        "192.168.255.255",
        "192.169.0.0",
    );
    // Multicast (224/4) then reserved (240/4) up to the broadcast address: the top 32nd.
    assert!(!internal("223.255.255.255"));
    for address in [
        "224.0.0.0",
        "239.255.255.255",
        "240.0.0.0",
        "255.255.255.255",
    ] {
        assert!(internal(address), "{address}");
    }
    for public in ["93.184.216.34", "192.0.2.2", "8.8.8.8"] {
        assert!(!internal(public), "{public}");
    }
}

#[test]
fn each_ipv6_range_is_internal_from_its_first_to_its_last_address_and_no_further() {
    assert!(internal("::") && internal("::1"));
    assert_range(
        "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "fc00::",
        "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "fe00::",
    );
    // Link-local (fe80::/10), site-local (fec0::/10), then multicast (ff00::/8) to the end.
    assert!(!internal("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
    for address in [
        "fe80::", "febf::1", "fec0::", "feff::1", "ff00::", "ff02::1",
    ] {
        assert!(internal(address), "{address}");
    }
    assert_range(
        "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "2001::",
        "2001:0:ffff:ffff:ffff:ffff:ffff:ffff",
        "2001:1::",
    );
    assert_range(
        "64:ff9b:0:ffff:ffff:ffff:ffff:ffff",
        "64:ff9b:1::",
        "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
        "64:ff9b:2::",
    );
    for public in ["2606:4700::1111", "2a00:1450::1"] {
        assert!(!internal(public), "{public}");
    }
}

#[test]
fn ipv6_forms_embedding_an_internal_ipv4_address_are_internal_and_public_ones_are_not() {
    for (embedding, public) in [
        ("::ffff:10.0.0.1", "::ffff:8.8.8.8"),
        ("::ffff:127.0.0.1", "::ffff:93.184.216.34"),
        ("::ffff:0:169.254.169.254", "::ffff:0:8.8.8.8"),
        ("::10.0.0.1", "::8.8.8.8"),
        ("64:ff9b::10.0.0.1", "64:ff9b::8.8.8.8"),
        ("64:ff9b::127.0.0.1", "64:ff9b::93.184.216.34"),
        ("2002:0a00:0001::", "2002:0808:0808::"),
        ("2002:7f00:0001::1", "2002:5db8:d822::1"),
        ("2002:a9fe:a9fe::", "2002:c000:0202::"),
        ("::ffff:240.0.0.1", "::ffff:223.255.255.255"),
    ] {
        assert!(
            internal(embedding),
            "{embedding} embeds an internal address"
        );
        assert!(!internal(public), "{public} embeds a public address");
    }
    // Just outside each embedding range, the last 32 bits are not an address.
    for outside in [
        "::1:0:0:0",
        "::fffe:a00:1",
        "64:ff9a:ffff:ffff:ffff:ffff:a00:1",
        "64:ff9b:0:0:0:1:a00:1",
    ] {
        assert!(!internal(outside), "{outside}");
    }
    assert!(!internal("2001:ffff::a00:1") && !internal("2003::a00:1"));
}

fn url(text: &str) -> Url {
    Url::parse(text).unwrap()
}

fn socket(text: &str) -> SocketAddr {
    SocketAddr::new(text.parse().unwrap(), 0)
}

#[test]
fn an_address_in_a_url_is_admitted_when_public_listed_or_in_a_listed_network() {
    let none = PrivateRegistries::default();
    assert_eq!(none.admits_url(&url("https://93.184.216.34/v2/")), Ok(()));
    for internal in [
        "http://127.0.0.1:5000/token",
        "http://[::1]:5000/",
        "http://[::ffff:10.0.0.1]/",
        "http://2130706433/",
        "http://0x7f.1/",
    ] {
        assert_eq!(
            none.admits_url(&url(internal)),
            Err(Refusal::PrivateAddress),
            "{internal}"
        );
    }
    let listed = PrivateRegistries::parse(&["127.0.0.1:5000", "10.96.0.0/12"]).unwrap();
    assert_eq!(listed.admits_url(&url("http://127.0.0.1:5000/v2/")), Ok(()));
    assert_eq!(
        listed.admits_url(&url("http://127.0.0.1:5001/v2/")),
        Err(Refusal::PrivateAddress)
    );
    assert_eq!(listed.admits_url(&url("https://10.100.0.7/v2/")), Ok(()));
    assert_eq!(
        listed.admits_url(&url("https://[::ffff:10.100.0.7]/")),
        Ok(())
    );
    assert_eq!(
        listed.admits_url(&url("https://10.112.0.0/v2/")),
        Err(Refusal::PrivateAddress)
    );
    assert_eq!(
        PrivateRegistries::every().admits_url(&url("http://169.254.169.254/")),
        Ok(())
    );
}

#[test]
fn a_name_is_left_to_the_resolver_unless_listed_with_another_port() {
    let none = PrivateRegistries::default();
    assert_eq!(none.admits_url(&url("https://localhost/v2/")), Ok(()));
    let listed = PrivateRegistries::parse(&["registry.internal:5000"]).unwrap();
    assert_eq!(
        listed.admits_url(&url("http://registry.internal:5000/v2/")),
        Ok(())
    );
    assert_eq!(
        listed.admits_url(&url("http://Registry.Internal:6379/")),
        Err(Refusal::PrivatePort)
    );
}

#[test]
fn resolved_addresses_are_kept_when_public_in_a_listed_network_or_all_for_a_listed_name() {
    let found = || vec![socket("10.0.0.5"), socket("93.184.216.34"), socket("::1")];
    let none = PrivateRegistries::default();
    assert_eq!(
        none.admit_addresses("mixed.example", found()),
        Ok(vec![socket("93.184.216.34")])
    );
    assert_eq!(
        none.admit_addresses("localhost", vec![socket("127.0.0.1"), socket("::1")]),
        Err(Refusal::PrivateAddress)
    );
    assert_eq!(
        none.admit_addresses("nothing.example", Vec::new()),
        Err(Refusal::PrivateAddress),
        "no address found is refused, not passed on"
    );
    let network = PrivateRegistries::parse(&["10.0.0.0/24"]).unwrap();
    assert_eq!(
        network.admit_addresses("mixed.example", found()),
        Ok(vec![socket("10.0.0.5"), socket("93.184.216.34")])
    );
    let named = PrivateRegistries::parse(&["*.svc.cluster.local:5000"]).unwrap();
    assert_eq!(
        named.admit_addresses("cache.ns.svc.cluster.local", found()),
        Ok(found())
    );
    assert_eq!(
        named.admit_addresses("evil.example", vec![socket("10.0.0.5")]),
        Err(Refusal::PrivateAddress)
    );
}

#[test]
fn entries_that_are_neither_a_host_nor_a_cidr_are_refused_naming_the_entry() {
    for bad in [
        "10.0.0.0/33",
        "not-an-address/8",
        "https://r.example",
        "r.example:http",
    ] {
        let err = PrivateRegistries::parse(&[bad]).unwrap_err();
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
}

#[test]
fn the_registries_of_references_are_their_api_hosts_and_nothing_else() {
    let cache = crate::registry::parse_reference("cache.ns.svc:5000/steps/out:v1").unwrap();
    let private = PrivateRegistries::registries_of(&[&cache]);
    assert_eq!(
        private.admit_addresses("cache.ns.svc", vec![socket("10.96.0.10")]),
        Ok(vec![socket("10.96.0.10")])
    );
    assert_eq!(
        private.admit_addresses("other.ns.svc", vec![socket("10.96.0.11")]),
        Err(Refusal::PrivateAddress)
    );
    assert_eq!(
        private.admits_url(&url("http://cache.ns.svc:5001/")),
        Err(Refusal::PrivatePort)
    );
}
