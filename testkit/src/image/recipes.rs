//! The images the project assembles without a container engine:
//!
//! - ocifit's own, from a built binary: what the `Dockerfile`'s release image holds, taken from this
//!   machine instead of distroless (the binary without debug info, as a release build has none, the
//!   shared libraries it links and the loader, CA certificates, a passwd entry for the nonroot user)
//!   with the same user, entrypoint, command, ports and labels;
//! - a flavor image: Debian's static busybox that prints which flavor it is and waits to be stopped;
//! - pause, the real node's pod sandbox;
//! - a registry: distribution's `registry` from the tools cache, as an ArtifactCache deploys it;
//! - a workflow step's image: Debian's static busybox with the applets a shell script needs.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::ImageBuilder;
use crate::error::{Error, Result, io};
use crate::tools::{Tool, Tools};

/// The user ocifit runs as (distroless' "nonroot"), the chart's `runAsUser`.
pub const OCIFIT_USER: &str = "65532:65532";
/// Where the binary goes; the entrypoint names it through `PATH`.
const OCIFIT_PATH: &str = "/usr/local/bin/ocifit";
/// The CA bundle registry TLS verifies against.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// distroless' `PATH`.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Where Debian's busybox-static installs busybox.
const BUSYBOX: &str = "/bin/busybox";
/// The OCI labels every ocifit image carries (the release workflow adds version, revision and date).
const STATIC_LABELS: [(&str, &str); 4] = [
    ("org.opencontainers.image.title", "ocifit"),
    (
        "org.opencontainers.image.description",
        "Kubernetes operator that gives every node the container image built for it",
    ),
    ("org.opencontainers.image.licenses", "Apache-2.0"),
    (
        "org.opencontainers.image.source",
        "https://github.com/ocifit/ocifit",
    ),
];

/// ocifit's image from `binary`, labelled with `version` and `revision`. A debug build's debug
/// info is left out: it is over a third of the binary, and every copy (layout, registry, the
/// node's content store and snapshot) costs a test's disk.
pub fn ocifit_image(binary: &Path, version: &str, revision: &str) -> Result<ImageBuilder> {
    let mut image = ImageBuilder::new()
        .file(OCIFIT_PATH, without_debug_info(binary)?, 0o755)
        .host_file(CA_BUNDLE, CA_BUNDLE, 0o644)
        .file(
            "/etc/passwd",
            "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
            0o644,
        )
        .file("/etc/group", "root:x:0:\nnonroot:x:65532:\n", 0o644)
        .directory("/home/nonroot", 0o700, 65532)
        .directory("/tmp", 0o1777, 0)
        .user(OCIFIT_USER)
        .env("PATH", PATH)
        .env("SSL_CERT_FILE", CA_BUNDLE)
        .entrypoint(&["ocifit"])
        .cmd(&["run"])
        .expose(8080)
        .expose(8443)
        .label("org.opencontainers.image.version", version)
        .label("org.opencontainers.image.revision", revision);
    for (key, value) in STATIC_LABELS {
        image = image.label(key, value);
    }
    for library in shared_libraries(binary)? {
        let path = library.to_string_lossy().into_owned();
        image = image.host_file(&path, library, 0o755);
    }
    Ok(image)
}

/// An image that prints `line` (e.g. "flavor vanilla") and then waits until it is stopped; it
/// answers SIGTERM at once, so its pods delete quickly.
pub fn flavor_image(line: &str) -> Result<ImageBuilder> {
    Ok(busybox(
        "a flavor image",
        &["sh", "sleep", "echo", "cat", "ls", "wget"],
    )?
    .env("PATH", "/bin")
    .env("FLAVOR_LINE", line)
    .entrypoint(&[
        "/bin/sh",
        "-c",
        "echo \"$FLAVOR_LINE\"; trap 'exit 0' TERM INT; while :; do sleep 1 & wait $!; done",
    ]))
}

/// The pod sandbox image: `pause` from the tools cache.
pub fn pause_image(tools: &Tools) -> Result<ImageBuilder> {
    let pause = tools.path(Tool::Pause)?;
    Ok(ImageBuilder::new()
        .host_file("/pause", pause, 0o755)
        .entrypoint(&["/pause"]))
}

/// distribution's registry (the binary from the tools cache), started as the official image starts
/// it (`registry serve /etc/distribution/config.yml`) with a config its `REGISTRY_*` environment
/// completes.
pub fn registry_image(tools: &Tools) -> Result<ImageBuilder> {
    let registry = tools.path(Tool::Registry)?;
    Ok(ImageBuilder::new()
        .host_file("/bin/registry", registry, 0o755)
        .file(
            "/etc/distribution/config.yml",
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/registry\nhttp:\n  addr: :5000\n",
            0o644,
        )
        .directory("/var/lib/registry", 0o755, 0)
        .expose(5000)
        .entrypoint(&["/bin/registry", "serve", "/etc/distribution/config.yml"]))
}

/// A workflow step's image: Debian's static busybox with `sh` and the applets scripts use, no
/// entrypoint (a step names its command).
pub fn step_image() -> Result<ImageBuilder> {
    let applets = [
        "sh", "awk", "cat", "cp", "echo", "false", "ls", "mkdir", "seq", "sleep", "sort", "tr",
        "wc",
    ];
    Ok(busybox("a step image", &applets)?.env("PATH", "/bin"))
}

/// An image of Debian's static busybox with `applets` linked in `/bin`.
fn busybox(what: &str, applets: &[&str]) -> Result<ImageBuilder> {
    if !Path::new(BUSYBOX).is_file() {
        return Err(Error::Format {
            action: format!("build {what}"),
            message: format!(
                "{BUSYBOX} is missing: install Debian's busybox-static (tools/install)"
            ),
        });
    }
    let mut image = ImageBuilder::new().host_file(BUSYBOX, BUSYBOX, 0o755);
    for applet in applets {
        image = image.symlink(&format!("/bin/{applet}"), "busybox");
    }
    Ok(image)
}

/// `binary`'s bytes without its debug sections (`objcopy --strip-debug`; symbols stay, as in a
/// release build).
fn without_debug_info(binary: &Path) -> Result<Vec<u8>> {
    let directory = tempfile::tempdir().map_err(io("create a temporary directory", binary))?;
    let stripped = directory.path().join("ocifit");
    let output = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(binary)
        .arg(&stripped)
        .output()
        .map_err(|source| Error::Spawn {
            program: "objcopy".into(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::Command {
            command: format!("objcopy --strip-debug {}", binary.display()),
            status: output.status.to_string(),
            output: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    std::fs::read(&stripped).map_err(io("read", &stripped))
}

/// The shared libraries `binary` links and its dynamic loader, as `ldd` lists them (none for a
/// static binary).
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|source| Error::Spawn {
            program: "ldd".into(),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        if stdout.contains("not a dynamic executable")
            || stderr.contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        return Err(Error::Command {
            command: format!("ldd {}", binary.display()),
            status: output.status.to_string(),
            output: stderr.trim().to_owned(),
        });
    }
    parse_ldd(&stdout).map_err(|message| Error::Format {
        action: format!("read the shared libraries of {}", binary.display()),
        message,
    })
}

/// The paths in `ldd`'s output: `name => /path (addr)` and the loader's `/path (addr)`; the vDSO
/// has no file. A library ldd cannot find is an error naming it.
fn parse_ldd(output: &str) -> std::result::Result<Vec<PathBuf>, String> {
    let mut paths = Vec::new();
    for line in output.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let target = match line.split_once("=>") {
            Some((name, target)) => {
                let target = target.trim();
                if target.starts_with("not found") {
                    return Err(format!("{} is not found", name.trim()));
                }
                target
            }
            None => line,
        };
        let path = target.split(" (").next().unwrap_or_default().trim();
        if path.starts_with('/') {
            paths.push(PathBuf::from(path));
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_libraries_and_the_loader_but_not_the_vdso() {
        let output = "\tlinux-vdso.so.1 (0x00007ffd5b1e6000)\n\
                      \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0c)\n\
                      \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0b)\n\
                      \t/lib64/ld-linux-x86-64.so.2 (0x00007f0d)\n";
        assert_eq!(
            parse_ldd(output).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn the_image_s_binary_keeps_its_symbols_and_drops_its_debug_info() {
        let sections = |path: &Path| {
            let output = Command::new("readelf")
                .args(["--section-headers", "--wide"])
                .arg(path)
                .output()
                .unwrap();
            assert!(output.status.success(), "{output:?}");
            String::from_utf8(output.stdout).unwrap()
        };
        let binary = std::env::current_exe().unwrap();
        assert!(
            sections(&binary).contains(".debug_line"),
            "a test build has line tables"
        );

        let dir = tempfile::tempdir().unwrap();
        let stripped = dir.path().join("stripped");
        std::fs::write(&stripped, without_debug_info(&binary).unwrap()).unwrap();
        let kept = sections(&stripped);
        assert!(
            !kept.contains(".debug_info") && !kept.contains(".debug_line"),
            "{kept}"
        );
        assert!(kept.contains(".symtab") && kept.contains(".text"), "{kept}");
    }

    #[test]
    fn a_library_ldd_cannot_find_is_named() {
        let output = "\tlibssl.so.3 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n";
        assert_eq!(parse_ldd(output).unwrap_err(), "libssl.so.3 is not found");
    }

    #[test]
    fn this_test_binary_links_its_libraries_through_the_loader() {
        let binary = std::env::current_exe().unwrap();
        let libraries = shared_libraries(&binary).unwrap();
        assert!(
            libraries
                .iter()
                .any(|l| l.to_string_lossy().contains("ld-linux")),
            "{libraries:?}"
        );
        assert!(libraries.iter().all(|l| l.is_file()), "{libraries:?}");
    }
}
