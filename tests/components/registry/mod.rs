//! The registry client (`ocifit::registry`): against the real registry (`real`), against an
//! in-process fake for what the real one cannot produce here (`fake`, served by `fake_server`),
//! where it may go and what its clients share (`hosts`), and over HTTPS with a private CA (`tls`).

mod fake;
mod fake_server;
mod hosts;
mod real;
mod tls;
