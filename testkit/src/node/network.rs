//! The link between this host and a real node's network namespace: a veth pair (the host's end
//! named for the node's slot, the node's end `eth0`), a /30 between them, a host route to the node's
//! pod subnet (the apiserver dials pods and the kubelet directly) and the node's default route to the
//! host (where the apiserver and the registry listen). Two host firewall rules drop anything the host
//! would forward to or from the node, so pod traffic never leaves this machine. Everything inside the
//! node (its bridge, kube-proxy's and the kubelet's iptables chains, its sysctls) lives and dies with
//! its namespace.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// What the host's firewall rules carry, so they can be found and removed.
const RULE_COMMENT: &str = "ocifit-testkit real node";

/// The addresses of one node's link and pods.
#[derive(Clone, Debug)]
pub(crate) struct Link {
    /// The host's end of the veth pair.
    pub(crate) host_veth: String,
    /// The host's address on the link.
    pub(crate) host_ip: Ipv4Addr,
    /// The node's address on the link (its InternalIP).
    pub(crate) node_ip: Ipv4Addr,
    /// The node's pod subnet.
    pub(crate) pod_subnet: String,
}

/// Wires the network namespace of process `holder` to the host.
pub(crate) fn wire(link: &Link, holder: u32) -> Result<()> {
    let veth = link.host_veth.as_str();
    let holder = holder.to_string();
    let host_cidr = format!("{}/30", link.host_ip);
    let node_ip = link.node_ip.to_string();
    run(
        "ip",
        &[
            "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", &holder,
        ],
    )?;
    run("ip", &["addr", "add", &host_cidr, "dev", veth])?;
    run("ip", &["link", "set", veth, "up"])?;
    run(
        "ip",
        &[
            "route",
            "add",
            &link.pod_subnet,
            "via",
            &node_ip,
            "dev",
            veth,
        ],
    )?;
    for direction in ["-i", "-o"] {
        run("iptables", &forward_rule("-I", direction, veth))?;
    }
    let inside = format!(
        "ip link set lo up && ip addr add {node_ip}/30 dev eth0 && ip link set eth0 up \
         && ip route add default via {}",
        link.host_ip
    );
    run(
        "nsenter",
        &["--target", &holder, "--net", "--", "sh", "-c", &inside],
    )
}

/// Removes the host's firewall rules and link end of `host_veth`; best effort, for teardown (the
/// link and its route usually went with the namespace already).
pub(crate) fn unwire(host_veth: &str) {
    for direction in ["-i", "-o"] {
        let check = forward_rule("-C", direction, host_veth);
        while quiet("iptables", &check) {
            if !quiet("iptables", &forward_rule("-D", direction, host_veth)) {
                break;
            }
        }
    }
    if quiet("ip", &["link", "show", host_veth]) {
        quiet("ip", &["link", "delete", host_veth]);
    }
}

/// `iptables -w ACTION FORWARD -i|-o VETH -m comment --comment … -j DROP`.
fn forward_rule<'a>(action: &'a str, direction: &'a str, veth: &'a str) -> Vec<&'a str> {
    vec![
        "-w",
        action,
        "FORWARD",
        direction,
        veth,
        "-m",
        "comment",
        "--comment",
        RULE_COMMENT,
        "-j",
        "DROP",
    ]
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            program: program.into(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::Command {
        command: format!("{program} {}", args.join(" ")),
        status: output.status.to_string(),
        output: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

/// Whether the command succeeded, its output discarded.
fn quiet(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
