//! The servers under load: the no-op, and ocifit's one admission host serving every route as
//! `ocifit run` does — `/mutate` (the index built in process over the flavor nodes),
//! `/placement` (one PlacementPolicy selecting every pod), `/artifacts/pods` and
//! `/artifacts/jobs` (a Ready ArtifactCache `oras` in the requests' namespace, a helper image) —
//! and each route's three floors.

use std::sync::Arc;

use actix_web::dev::ServerHandle;
use anyhow::Result;
use bytes::Bytes;
use ocifit::admission::ServingCert;
use ocifit::admission::{DEADLINE, Host, admission_server};
use ocifit::telemetry::Metrics;

use crate::fixture::Expect;
use crate::floor::{self, Canned, Floor};
use crate::load::Target;
use crate::noop;
use crate::routes::{self, Request};

/// The no-op's name in the report.
pub const NOOP: &str = "no-op";
/// The start of an equal-I/O floor's name, followed by its route's.
pub const FLOOR: &str = "floor ";
/// The start of a decoding floor's name, followed by its route's.
pub const DECODING_FLOOR: &str = "decoding floor ";
/// The start of a webhook floor's name, followed by its route's.
pub const WEBHOOK_FLOOR: &str = "webhook floor ";

/// A server under load: its name in the report (the route's path), where it is, and the
/// requests sent to it in turn with the answer each must get.
pub struct Server {
    pub name: &'static str,
    pub target: Target,
    pub handle: ServerHandle,
    pub requests: Vec<Request>,
}

impl Server {
    /// The bodies, in turn.
    pub fn bodies(&self) -> Vec<Bytes> {
        self.requests.iter().map(|r| r.body.clone()).collect()
    }
}

/// The no-op first, then ocifit's routes among `routes` (all when empty).
pub fn start(
    nodes: usize,
    wanted_routes: &[String],
    ca_pem: &str,
    cert: Arc<ServingCert>,
) -> Result<Vec<Server>> {
    let (noop_address, noop) = noop::start(ServingCert::server_config(Arc::clone(&cert))?)?;
    let mut servers = vec![Server {
        name: NOOP,
        target: Target::new(noop_address, ca_pem, "/mutate")?,
        handle: noop,
        requests: routes::pods(|_| Expect::Unchanged)?,
    }];
    let wanted = |path: &str| wanted_routes.is_empty() || wanted_routes.iter().any(|r| r == path);
    let host = Host {
        routes: routes::routes(nodes)?,
        metrics: Metrics::new(None),
        deadline: DEADLINE,
        draining: Default::default(),
        client_ca: None,
        uncertified: Default::default(),
    };
    let (server, address) = admission_server(([127, 0, 0, 1], 0).into(), cert, host)?;
    let handle = server.handle();
    tokio::spawn(server);
    let ocifit = routes::requests()?;
    for (path, requests) in ocifit {
        if wanted(path) {
            servers.push(Server {
                name: path,
                target: Target::new(address, ca_pem, path)?,
                handle: handle.clone(),
                requests,
            });
        }
    }
    Ok(servers)
}

/// Each of ocifit's routes among `servers` gets three floors (`floor ROUTE`, `decoding floor
/// ROUTE`, `webhook floor ROUTE`) answering each request with what the route answered to it
/// (`answers`, by server and request), those among `wanted` (all when empty); one server holds
/// them all.
pub fn floors(
    servers: &[Server],
    answers: &[Vec<Bytes>],
    wanted: &[Floor],
    ca_pem: &str,
    cert: Arc<ServingCert>,
) -> Result<Vec<Server>> {
    let mut canned = Vec::new();
    let mut routes = Vec::new();
    for (server, answers) in servers.iter().zip(answers) {
        if server.name == NOOP {
            continue;
        }
        let mut answering = Canned::default();
        for (request, answer) in server.requests.iter().zip(answers) {
            answering.add(request.body.clone(), answer.clone())?;
        }
        for (kind, name, path) in [
            (Floor::Io, FLOOR, "/floor"),
            (Floor::Decoding, DECODING_FLOOR, "/decoding-floor"),
            (Floor::Webhook, WEBHOOK_FLOOR, "/webhook-floor"),
        ] {
            if !wanted.is_empty() && !wanted.contains(&kind) {
                continue;
            }
            // Leaked: a handful of names that live as long as the run.
            let path: &'static str =
                Box::leak(format!("{path}{}", server.target.path).into_boxed_str());
            let name: &'static str = Box::leak(format!("{name}{}", server.name).into_boxed_str());
            canned.push((path.to_owned(), answering.clone(), kind));
            routes.push((name, path, server.requests.clone()));
        }
    }
    let (address, handle) = floor::start(ServingCert::server_config(cert)?, canned)?;
    routes
        .into_iter()
        .map(|(name, path, requests)| {
            Ok(Server {
                name,
                target: Target::new(address, ca_pem, path)?,
                handle: handle.clone(),
                requests,
            })
        })
        .collect()
}
