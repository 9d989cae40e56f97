//! The NFD image-compatibility parser (YAML, and JSON as YAML): any bytes parse into an artifact
//! or an error, and a parsed artifact can be evaluated, without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ocifit::engine::{Artifact, Format};

mod common;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(artifact) = Artifact::parse(Format::Nfd, bytes) {
        common::exercise(&artifact);
    }
});
