use proptest::prelude::*;

use super::*;

const HEX64: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// oci-spec's own parser (its regex): what ours must agree with.
fn oracle(input: &str) -> Result<Reference, String> {
    input
        .parse::<Reference>()
        .map_err(|err: ParseError| err.to_string())
}

fn ours(input: &str) -> Result<Reference, String> {
    parse(input).map_err(|err| err.to_string())
}

fn refused(input: &str) -> ParseError {
    parse(input).expect_err(input)
}

#[test]
fn a_port_digest_and_tag_are_read_apart() {
    let r = parse(&format!("127.0.0.1:5000/a/b:v1@sha256:{HEX64}")).unwrap();
    assert_eq!(r.registry(), "127.0.0.1:5000");
    assert_eq!(r.repository(), "a/b");
    assert_eq!(r.tag(), Some("v1"));
    assert_eq!(r.digest(), Some(format!("sha256:{HEX64}").as_str()));
    // A number after the only `:` of a one-part name is a tag, not a port.
    let r = parse("test.com:5000").unwrap();
    assert_eq!(
        (r.registry(), r.repository()),
        ("docker.io", "library/test.com")
    );
    assert_eq!(r.tag(), Some("5000"));
}

#[test]
fn uppercase_is_refused_in_the_path_but_taken_in_the_host() {
    assert_eq!(
        refused("registry.example.com/Acme/app"),
        ParseError::ReferenceInvalidFormat
    );
    assert_eq!(
        parse("Registry.Example.com/acme/app").unwrap().registry(),
        "Registry.Example.com"
    );
}

#[test]
fn a_tag_is_at_most_128_characters_and_starts_with_a_word_character() {
    let longest = format!("a:{}", "t".repeat(128));
    assert_eq!(parse(&longest).unwrap().tag().map(str::len), Some(128));
    assert_eq!(
        refused(&format!("a:{}", "t".repeat(129))),
        ParseError::ReferenceInvalidFormat
    );
    assert_eq!(refused("a:-v1"), ParseError::ReferenceInvalidFormat);
    assert_eq!(refused("a:.v1"), ParseError::ReferenceInvalidFormat);
    assert_eq!(parse("a:_v1.0-rc").unwrap().tag(), Some("_v1.0-rc"));
    assert_eq!(refused("a:vé"), ParseError::ReferenceInvalidFormat);
}

#[test]
fn empty_components_are_refused() {
    for bad in [
        "/a",
        "a/",
        "a//b",
        "host:/a",
        ":tag",
        "a:",
        "a@",
        "@sha256:x",
        ".a/b",
        "a.b./c",
    ] {
        assert_eq!(refused(bad), ParseError::ReferenceInvalidFormat, "{bad:?}");
    }
    assert_eq!(refused(""), ParseError::NameEmpty);
}

#[test]
fn path_separators_are_one_dot_one_or_two_underscores_or_dashes() {
    for good in ["a.b", "a_b", "a__b", "a-b", "a---b", "a0.b1_c2__d3-e4"] {
        assert!(parse(good).is_ok(), "{good:?}");
    }
    for bad in ["a..b", "a___b", "a._b", "a-.b", "-a", "a-", "a_"] {
        assert_eq!(refused(bad), ParseError::ReferenceInvalidFormat, "{bad:?}");
    }
}

#[test]
fn a_host_label_may_not_start_or_end_with_a_dash_and_a_port_is_digits() {
    assert!(parse("my-host.example/a").is_ok());
    for bad in [
        "-host.example/a",
        "host-.example/a",
        "host:50a0/a",
        "host:/a",
        "[::1]:5000/a",
    ] {
        assert_eq!(refused(bad), ParseError::ReferenceInvalidFormat, "{bad:?}");
    }
}

#[test]
fn digests_are_checked_for_form_then_algorithm_then_length() {
    assert_eq!(refused("a@sha256:abcd"), ParseError::ReferenceInvalidFormat);
    assert_eq!(
        refused(&format!("a@md5:{}", &HEX64[..32])),
        ParseError::DigestUnsupported
    );
    assert_eq!(
        refused(&format!("a@sha256:{}", &HEX64[..40])),
        ParseError::DigestInvalidLength
    );
    assert_eq!(
        refused(&format!("a@sha512:{HEX64}")),
        ParseError::DigestInvalidLength
    );
    assert_eq!(
        refused(&format!("a@sha256:{HEX64}@sha256:{HEX64}")),
        ParseError::ReferenceInvalidFormat
    );
    assert!(parse(&format!("a@sha256:{}", HEX64.to_uppercase())).is_ok());
}

#[test]
fn a_repository_over_255_characters_is_too_long() {
    let name = format!("host.example/{}", "a".repeat(255));
    assert!(parse(&name).is_ok());
    assert_eq!(refused(&format!("{name}a")), ParseError::NameTooLong);
    // Docker Hub's `library/` counts.
    assert_eq!(refused(&"a".repeat(250)), ParseError::NameTooLong);
}

#[test]
fn the_cases_written_in_this_project_read_as_oci_spec_reads_them() {
    for input in [
        "ubuntu",
        "acme/app:v1",
        "index.docker.io/library/ubuntu:22.04",
        "127.0.0.1:5000/acme/compat:v1",
        "localhost:5000/compat",
        "localhost/compat",
        "registry.example.com/a/b/c:1.0",
        "UPPER/case",
        "test.com:tag",
        "docker.io/ubuntu",
    ] {
        assert_eq!(ours(input), oracle(input), "{input:?}");
    }
}

/// Pieces references are made of, so that random joins reach deep into the grammar.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "a",
            "b0",
            "Z",
            "-",
            "--",
            ".",
            "_",
            "__",
            "/",
            ":",
            "@",
            "5000",
            "localhost",
            "docker.io",
            "index.docker.io",
            "sha256:",
            "sha512:",
            "sha256+b64:",
            "md5:",
            "latest",
        ])
        .prop_map(str::to_string),
        "[0-9a-f]{30,66}",
        "[a-zA-Z0-9._:/@+-]{1,6}",
        (1usize..140).prop_map(|n| "t".repeat(n)),
    ]
}

proptest! {
    #[test]
    fn every_input_reads_as_oci_spec_reads_it(pieces in prop::collection::vec(piece(), 0..10)) {
        let input = pieces.concat();
        prop_assert_eq!(ours(&input), oracle(&input), "{:?}", input);
    }

    #[test]
    fn any_ascii_reads_as_oci_spec_reads_it(input in "[ -~]{0,40}") {
        prop_assert_eq!(ours(&input), oracle(&input), "{:?}", input);
    }
}
