use super::*;

fn mirrors(files: &[(&str, &str)]) -> Mirrors {
    let mut mirrors = Mirrors::default();
    for (namespace, text) in files {
        mirrors.add(namespace, "hosts.toml", text).unwrap();
    }
    mirrors
}

fn error(text: &str) -> String {
    let mut mirrors = Mirrors::default();
    mirrors
        .add("docker.io", "/certs.d/docker.io/hosts.toml", text)
        .unwrap_err()
        .to_string()
}

/// `(host, plain_http, root, mirror)` of an endpoint.
type Row = (String, Option<bool>, String, bool);

fn route(mirrors: &Mirrors, registry: &str, api_host: &str, need: Need) -> Option<Vec<Row>> {
    mirrors.route(registry, api_host, need).map(|endpoints| {
        endpoints
            .into_iter()
            .map(|e| (e.host, e.plain_http, e.root, e.mirror))
            .collect()
    })
}

fn ep(
    host: &str,
    plain: Option<bool>,
    root: &str,
    mirror: bool,
) -> (String, Option<bool>, String, bool) {
    (host.to_owned(), plain, root.to_owned(), mirror)
}

const TWO_MIRRORS: &str = r#"
server = "https://registry-1.docker.io"

[host."https://public-mirror.example.com"]
  capabilities = ["pull"]
[host."http://docker-mirror.internal:5000"]
  capabilities = ["pull", "resolve"]
"#;

#[test]
fn mirrors_come_first_in_the_files_order_then_the_server() {
    let m = mirrors(&[("docker.io", TWO_MIRRORS)]);
    assert_eq!(
        route(&m, "docker.io", "registry-1.docker.io", Need::Pull).unwrap(),
        [
            ep("public-mirror.example.com", Some(false), "/v2", true),
            ep("docker-mirror.internal:5000", Some(true), "/v2", true),
            ep("registry-1.docker.io", Some(false), "/v2", false),
        ]
    );
}

#[test]
fn the_order_is_the_files_whatever_the_names_sort_to() {
    let text = r#"
[host."https://z.example.com"]
[host."https://a.example.com"]
[host."https://m.example.com"]
"#;
    let m = mirrors(&[("r.example.com", text)]);
    let hosts: Vec<String> = route(&m, "r.example.com", "r.example.com", Need::Pull)
        .unwrap()
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(
        hosts,
        [
            "z.example.com",
            "a.example.com",
            "m.example.com",
            "r.example.com"
        ]
    );
}

#[test]
fn only_hosts_with_resolve_resolve_tags() {
    let m = mirrors(&[("docker.io", TWO_MIRRORS)]);
    assert_eq!(
        route(&m, "docker.io", "registry-1.docker.io", Need::Resolve).unwrap(),
        [
            ep("docker-mirror.internal:5000", Some(true), "/v2", true),
            ep("registry-1.docker.io", Some(false), "/v2", false),
        ]
    );
}

#[test]
fn a_host_without_capabilities_may_do_everything() {
    let m = mirrors(&[("r.example.com", "[host.\"https://m.example.com\"]\n")]);
    for need in [Need::Pull, Need::Resolve] {
        let hosts = route(&m, "r.example.com", "r.example.com", need).unwrap();
        assert_eq!(hosts[0], ep("m.example.com", Some(false), "/v2", true));
    }
}

#[test]
fn without_a_server_the_registry_itself_comes_last_as_its_flags_say() {
    let m = mirrors(&[("r.example.com:5000", "[host.\"https://m.example.com\"]\n")]);
    assert_eq!(
        route(
            &m,
            "r.example.com:5000",
            "r.example.com:5000",
            Need::Resolve
        )
        .unwrap(),
        [
            ep("m.example.com", Some(false), "/v2", true),
            ep("r.example.com:5000", None, "/v2", false),
        ]
    );
}

#[test]
fn a_server_with_capabilities_limits_what_the_fallback_may_do() {
    let text = r#"
server = "https://upstream.example.com"
capabilities = ["pull"]
[host."https://m.example.com"]
  capabilities = ["pull"]
"#;
    let m = mirrors(&[("r.example.com", text)]);
    assert_eq!(
        route(&m, "r.example.com", "r.example.com", Need::Resolve),
        Some(vec![])
    );
    assert_eq!(
        route(&m, "r.example.com", "r.example.com", Need::Pull).unwrap(),
        [
            ep("m.example.com", Some(false), "/v2", true),
            ep("upstream.example.com", Some(false), "/v2", true),
        ]
    );
}

#[test]
fn a_server_alone_replaces_the_registry() {
    let m = mirrors(&[("_default", "server = \"registry.example.com\"\n")]);
    assert_eq!(
        route(&m, "quay.io", "quay.io", Need::Resolve).unwrap(),
        [ep("registry.example.com", Some(false), "/v2", true)]
    );
}

#[test]
fn a_registrys_own_file_wins_over_default_and_no_file_means_no_route() {
    let m = mirrors(&[
        ("_default", "[host.\"https://all.example.com\"]\n"),
        ("quay.io", "[host.\"https://quay-mirror.example.com\"]\n"),
    ]);
    assert_eq!(
        route(&m, "quay.io", "quay.io", Need::Pull).unwrap()[0].0,
        "quay-mirror.example.com"
    );
    assert_eq!(
        route(&m, "ghcr.io", "ghcr.io", Need::Pull).unwrap()[0].0,
        "all.example.com"
    );
    let only_quay = mirrors(&[("quay.io", "[host.\"https://q.example.com\"]\n")]);
    assert_eq!(route(&only_quay, "ghcr.io", "ghcr.io", Need::Pull), None);
    assert!(Mirrors::default().is_empty());
    assert_eq!(
        route(&Mirrors::default(), "ghcr.io", "ghcr.io", Need::Pull),
        None
    );
}

#[test]
fn containerds_directory_names_for_ports_name_the_same_registry() {
    for directory in ["r.example.com_5000_", "r.example.com:5000"] {
        let m = mirrors(&[(directory, "[host.\"https://m.example.com\"]\n")]);
        assert!(
            route(&m, "r.example.com:5000", "r.example.com:5000", Need::Pull).is_some(),
            "{directory}"
        );
        assert_eq!(
            route(&m, "r.example.com", "r.example.com", Need::Pull),
            None,
            "{directory}"
        );
    }
    // Not a port: the name as it is.
    assert_eq!(namespace_of("my_registry_x_"), "my_registry_x_");
    assert_eq!(namespace_of("_5000_"), "_5000_");
    assert_eq!(namespace_of("_default"), "_default");
}

#[test]
fn both_spellings_of_one_registry_are_refused_as_a_second_file() {
    let mut m = Mirrors::default();
    m.add("r.example.com_5000_", "a", "").unwrap();
    let err = m.add("r.example.com:5000", "b/hosts.toml", "").unwrap_err();
    assert!(err.to_string().contains("b/hosts.toml"), "{err}");
    assert!(err.to_string().contains("second file"), "{err}");
}

#[test]
fn url_paths_become_the_api_root_as_in_containerd() {
    let text = r#"
[host."https://harbor.example.com/v2/docker.io"]
  override_path = true
[host."https://nexus.example.com/repository/docker"]
[host."https://other.example.com/prefix/v2/"]
[host."https://bare.example.com/"]
"#;
    let m = mirrors(&[("docker.io", text)]);
    let roots: Vec<(String, String)> = route(&m, "docker.io", "registry-1.docker.io", Need::Pull)
        .unwrap()
        .into_iter()
        .map(|e| (e.0, e.2))
        .collect();
    assert_eq!(
        roots,
        [
            ("harbor.example.com".into(), "/v2/docker.io".into()),
            ("nexus.example.com".into(), "/repository/docker/v2".into()),
            ("other.example.com".into(), "/prefix/v2".into()),
            ("bare.example.com".into(), "/v2".into()),
            ("registry-1.docker.io".into(), "/v2".into()),
        ]
    );
}

#[test]
fn a_host_naming_the_registrys_own_api_host_is_not_a_mirror() {
    let m = mirrors(&[("docker.io", "[host.\"https://registry-1.docker.io\"]\n")]);
    assert!(!route(&m, "docker.io", "registry-1.docker.io", Need::Pull).unwrap()[0].3);
}

#[test]
fn hosts_lists_every_configured_host_once_with_its_scheme() {
    let m = mirrors(&[
        ("docker.io", TWO_MIRRORS),
        (
            "_default",
            "[host.\"http://docker-mirror.internal:5000\"]\n",
        ),
    ]);
    assert_eq!(
        m.hosts(),
        [
            ("docker-mirror.internal:5000".to_owned(), true),
            ("public-mirror.example.com".to_owned(), false),
            ("registry-1.docker.io".to_owned(), false),
        ]
    );
}

#[test]
fn skip_verify_false_is_accepted_anywhere() {
    mirrors(&[(
        "docker.io",
        "skip_verify = false\nserver = \"https://r\"\n[host.\"https://m\"]\nskip_verify = false\n",
    )]);
}

#[test]
fn every_bad_file_names_the_file_and_the_key() {
    let cases = [
        ("server = 5", "key `server` expected a string"),
        (
            "server = \"ftp://x\"",
            "key `server` \"ftp://x\" is not an http:// or https:// URL",
        ),
        ("server = \"https://u:p@x\"", "carries credentials"),
        ("server = \"https://x?a=b\"", "has a query or fragment"),
        ("server = \"https://\"", "key `server`"),
        (
            "capabilities = [\"pull\"]",
            "key `capabilities` set without `server`",
        ),
        (
            "override_path = true",
            "key `override_path` set without `server`",
        ),
        (
            "server = \"https://x\"\ncapabilities = \"pull\"",
            "key `capabilities` expected a list",
        ),
        (
            "server = \"https://x\"\noverride_path = 1",
            "key `override_path` expected true or false",
        ),
        ("host = 1", "key `host` expected tables"),
        ("[host]\nx = 1", "key `host.\"x\"` expected a table"),
        (
            "[host.\"https://m\"]\ncapabilities = [\"pul\"]",
            "key `host.\"https://m\".capabilities` unknown capability \"pul\"",
        ),
        (
            "[host.\"https://m\"]\ncapabilities = [1]",
            "unknown capability of type integer",
        ),
        (
            "[host.\"https://m\"]\nskip_verify = true",
            "key `host.\"https://m\".skip_verify` is not supported",
        ),
        ("skip_verify = true", "key `skip_verify` is not supported"),
        (
            "[host.\"https://m\"]\nca = \"m.crt\"",
            "key `host.\"https://m\".ca` is not supported: give the CA with --ca-file",
        ),
        (
            "[host.\"https://m\"]\nclient = \"c.pem\"",
            "`host.\"https://m\".client` is not supported",
        ),
        (
            "[host.\"https://m\".header]\nx-a = \"b\"",
            "`host.\"https://m\".header` is not supported",
        ),
        (
            "dial_timeout = \"1s\"",
            "key `dial_timeout` is not supported",
        ),
        ("proxy = \"http://p:8080\"", "key `proxy` is not supported"),
        (
            "mirrors = []",
            "key `mirrors` is not a hosts.toml key ocifit knows",
        ),
        (
            "[host.\"https://m\"]\n[host.\"https://m\".host.\"https://n\"]",
            "`host.\"https://m\".host` is not a hosts.toml key",
        ),
        (
            "[host.\"gopher://m\"]",
            "key `host.\"gopher://m\"` \"gopher://m\" is not an http:// or https:// URL",
        ),
        ("server = \"x\"\nserver = \"y\"", "not TOML"),
        ("[host", "not TOML"),
    ];
    for (text, expected) in cases {
        let err = error(text);
        assert!(
            err.starts_with("/certs.d/docker.io/hosts.toml: "),
            "{text}: {err}"
        );
        assert!(err.contains(expected), "{text}: {err}");
    }
}

#[test]
fn a_directory_is_read_skipping_hidden_entries_and_refusing_strays() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("docker.io/hosts.toml", TWO_MIRRORS);
    write("r.example.com_5000_/hosts.toml", "[host.\"https://m\"]\n");
    write("..data/ignored/hosts.toml", "not toml [");
    let m = Mirrors::load(dir.path()).unwrap();
    assert!(route(&m, "docker.io", "registry-1.docker.io", Need::Pull).is_some());
    assert!(route(&m, "r.example.com:5000", "r.example.com:5000", Need::Pull).is_some());

    write("stray.txt", "");
    let err = Mirrors::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("stray.txt") && err.contains("not a registry's directory"),
        "{err}"
    );
    std::fs::remove_file(dir.path().join("stray.txt")).unwrap();

    std::fs::create_dir(dir.path().join("quay.io")).unwrap();
    std::fs::write(dir.path().join("quay.io/ca.crt"), "").unwrap();
    let err = Mirrors::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("quay.io/hosts.toml") && err.contains("is missing"),
        "{err}"
    );
    write("quay.io/hosts.toml", "[host.\"https://m\"]\nheader = 1\n");
    let err = Mirrors::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("quay.io/hosts.toml: key `host.\"https://m\".header`"),
        "{err}"
    );

    let err = Mirrors::load(&dir.path().join("absent"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("absent"), "{err}");
}
