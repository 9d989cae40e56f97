//! One build for both of the README's commands: `cargo build --workspace` (what `tools/demo`
//! builds) resolves every dependency with the features `cargo test --workspace` (`tools/test`)
//! resolves it with, so the tests compile none of what the demo built again.

use std::collections::BTreeSet;
use std::process::Command;

/// Each package of the workspace's build with the features it is built with, following cargo
/// tree's `edges` (dependency kinds).
fn resolved(edges: &str) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--workspace",
            "--locked",
            "--offline",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p} {f}", "--edges", edges])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.trim_end_matches(" (*)").to_owned())
        .collect()
}

#[test]
fn the_demos_build_resolves_every_dependency_as_the_tests_build_does() {
    let tests = resolved("normal,build,dev");
    let again: Vec<String> = resolved("normal,build")
        .into_iter()
        .filter(|unit| !tests.contains(unit))
        .collect();
    assert!(
        again.is_empty(),
        "tools/demo builds these with features tools/test resolves otherwise, so the tests would \
         compile them (and all that depends on them) again; turn the tests' features on in the \
         test kit's dependencies: {again:#?}"
    );
}
