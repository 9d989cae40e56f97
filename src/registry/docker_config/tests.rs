use base64::Engine as _;

use super::*;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn basic(user: &str, pass: &str) -> Credentials {
    Credentials::Basic {
        username: user.into(),
        password: pass.into(),
    }
}

fn config(entries: &[(&str, &str)]) -> DockerConfig {
    let auths: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(k, user)| {
            (
                (*k).to_string(),
                serde_json::json!({"auth": b64(&format!("{user}:pw-{user}"))}),
            )
        })
        .collect();
    DockerConfig::from_json(serde_json::json!({ "auths": auths }).to_string().as_bytes()).unwrap()
}

fn user(config: &DockerConfig, registry: &str, repository: &str) -> Option<String> {
    match config.lookup(registry, repository)? {
        Credentials::Basic { username, .. } => Some(username.clone()),
        Credentials::Bearer(_) => Some("<bearer>".into()),
        Credentials::IdentityToken(_) => Some("<identity>".into()),
    }
}

#[test]
fn dockerconfigjson_auth_field_decodes_to_basic_credentials() {
    let c = config(&[("127.0.0.1:5000", "alice")]);
    assert_eq!(
        c.lookup("127.0.0.1:5000", "acme/app"),
        Some(&basic("alice", "pw-alice"))
    );
}

#[test]
fn username_and_password_fields_work_without_auth() {
    let json = br#"{"auths":{"r.example.com":{"username":"bob","password":"s3cret"}}}"#;
    let c = DockerConfig::from_json(json).unwrap();
    assert_eq!(
        c.lookup("r.example.com", "x"),
        Some(&basic("bob", "s3cret"))
    );
}

#[test]
fn registry_token_is_used_as_bearer() {
    let json = br#"{"auths":{"r.example.com":{"registrytoken":"tok"}}}"#;
    let c = DockerConfig::from_json(json).unwrap();
    assert_eq!(
        c.lookup("r.example.com", "x"),
        Some(&Credentials::Bearer("tok".into()))
    );
}

#[test]
fn identity_token_wins_over_the_auth_docker_writes_beside_it() {
    let json = format!(
        r#"{{"auths":{{"r.example.com":{{"auth":"{}","identitytoken":"refresh-me"}}}}}}"#,
        b64("<token>:")
    );
    let c = DockerConfig::from_json(json.as_bytes()).unwrap();
    assert_eq!(
        c.lookup("r.example.com", "x"),
        Some(&Credentials::IdentityToken("refresh-me".into()))
    );
    let shown = format!("{:?}", c.lookup("r.example.com", "x"));
    assert!(!shown.contains("refresh-me"), "{shown}");
}

#[test]
fn a_config_json_without_auths_has_no_entries_rather_than_an_error() {
    for json in [
        r#"{"credsStore":"desktop"}"#,
        r#"{"currentContext":"default","credHelpers":{"gcr.io":"gcloud"}}"#,
    ] {
        let c = DockerConfig::from_json(json.as_bytes()).unwrap();
        assert!(c.is_empty(), "{json}");
    }
}

#[test]
fn legacy_dockercfg_without_auths_wrapper_is_read() {
    let json = format!(
        r#"{{"https://r.example.com":{{"auth":"{}","email":"a@b"}}}}"#,
        b64("carol:pw")
    );
    let c = DockerConfig::from_json(json.as_bytes()).unwrap();
    assert_eq!(user(&c, "r.example.com", "x").as_deref(), Some("carol"));
}

#[test]
fn scheme_and_v1_v2_paths_are_ignored_in_keys() {
    let c = config(&[
        ("https://a.example.com/v2/", "a"),
        ("http://b.example.com/v1/", "b"),
    ]);
    assert_eq!(user(&c, "a.example.com", "x").as_deref(), Some("a"));
    assert_eq!(user(&c, "b.example.com", "x").as_deref(), Some("b"));
}

#[test]
fn port_must_match_exactly() {
    let c = config(&[("127.0.0.1:5000", "five")]);
    assert_eq!(user(&c, "127.0.0.1:5001", "x"), None);
    assert_eq!(user(&c, "127.0.0.1", "x"), None);
    let no_port = config(&[("127.0.0.1", "none")]);
    assert_eq!(user(&no_port, "127.0.0.1:5000", "x"), None);
}

#[test]
fn more_specific_path_wins_over_host() {
    let c = config(&[("quay.io", "host"), ("quay.io/acme", "acme")]);
    assert_eq!(user(&c, "quay.io", "acme/app").as_deref(), Some("acme"));
    assert_eq!(user(&c, "quay.io", "other/app").as_deref(), Some("host"));
}

#[test]
fn path_is_a_plain_prefix_as_in_the_kubelet() {
    let c = config(&[("quay.io/acme", "acme")]);
    assert_eq!(user(&c, "quay.io", "acme-two/app").as_deref(), Some("acme"));
    assert_eq!(user(&c, "quay.io", "other/app"), None);
}

#[test]
fn host_glob_matches_one_label_per_star() {
    let c = config(&[("*.example.com", "glob")]);
    assert_eq!(user(&c, "eu.example.com", "x").as_deref(), Some("glob"));
    assert_eq!(user(&c, "example.com", "x"), None);
    assert_eq!(user(&c, "a.eu.example.com", "x"), None);
    let q = config(&[("r?.example.com", "q")]);
    assert_eq!(user(&q, "r1.example.com", "x").as_deref(), Some("q"));
    assert_eq!(user(&q, "r12.example.com", "x"), None);
}

#[test]
fn docker_hub_images_use_the_index_docker_io_entry() {
    let c = config(&[("https://index.docker.io/v1/", "hub")]);
    assert_eq!(
        user(&c, "docker.io", "library/ubuntu").as_deref(),
        Some("hub")
    );
    assert_eq!(user(&c, "ghcr.io", "library/ubuntu"), None);
    let short = config(&[("docker.io", "short")]);
    assert_eq!(
        user(&short, "docker.io", "acme/app").as_deref(),
        Some("short")
    );
}

#[test]
fn other_hosts_never_receive_credentials() {
    let c = config(&[("registry.example.com", "a")]);
    assert_eq!(user(&c, "registry.example.com.evil.io", "x"), None);
    assert_eq!(user(&c, "evil.io", "registry.example.com/x"), None);
}

#[test]
fn entries_without_credentials_are_skipped() {
    let c = DockerConfig::from_json(br#"{"auths":{"r.example.com":{"email":"a@b"}}}"#).unwrap();
    assert!(c.is_empty());
}

#[test]
fn malformed_configs_are_errors_that_do_not_echo_secrets() {
    for bad in [
        &b"not json"[..],
        br#"{"auths":["a"]}"#,
        br#"{"auths":{"r":{"auth":"%%%not-base64-secret"}}}"#,
    ] {
        let err = DockerConfig::from_json(bad).unwrap_err();
        assert!(!err.to_string().contains("not-base64-secret"), "{err}");
    }
    let no_colon = format!(
        r#"{{"auths":{{"r":{{"auth":"{}"}}}}}}"#,
        b64("justapassword")
    );
    let err = DockerConfig::from_json(no_colon.as_bytes()).unwrap_err();
    assert!(!err.to_string().contains("justapassword"), "{err}");
}

#[test]
fn debug_output_never_shows_secrets() {
    let c = config(&[("r.example.com", "alice")]);
    let text = format!("{c:?} {:?}", c.lookup("r.example.com", "x"));
    assert!(!text.contains("pw-alice"), "{text}");
    assert!(text.contains("r.example.com"), "{text}");
    let bearer = format!("{:?}", Credentials::Bearer("tok-secret".into()));
    assert!(!bearer.contains("tok-secret"));
}
