//! The registry client (`ocifit::registry`): against the real registry (`real`), against an
//! in-process fake for what the real one cannot produce here (`fake`, served by `fake_server`),
//! where it may go and what its clients share (`hosts`), through registry mirrors (`mirrors`), the outbound fence (`fence`), and over HTTPS with a private CA (`tls`).

mod fake;
mod fake_server;
mod fence;
mod hosts;
mod mirrors;
mod real;
mod tls;

use ocifit::engine::Format;
use ocifit::registry::ResolvedArtifact;

/// `resolved` is `example/flavor-compat.json` (read as ocifit's format) at `digest`: its three
/// candidate sets in order.
fn assert_flavor_example(resolved: &ResolvedArtifact, digest: &str) {
    assert_eq!(
        (resolved.digest.as_str(), resolved.format),
        (digest, Format::Ocifit)
    );
    let tags: Vec<&str> = resolved.artifact.sets().iter().map(|s| s.tag()).collect();
    assert_eq!(tags, ["debian:11", "ubuntu:24.04", "rockylinux:9"]);
}
