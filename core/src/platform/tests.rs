use std::collections::BTreeMap;

use super::*;

fn platform(text: &str) -> Platform {
    text.parse()
        .unwrap_or_else(|err| panic!("{text:?} is a platform: {err}"))
}

fn normal(text: &str) -> String {
    platform(text).normalized().to_string()
}

/// A node labelled `os` and `arch`, its variant unknown as for every real node.
fn labelled(os: &str, arch: &str) -> NodePlatform {
    NodePlatform::from_labels(&BTreeMap::from([
        (OS_LABEL.to_owned(), os.to_owned()),
        (ARCH_LABEL.to_owned(), arch.to_owned()),
    ]))
}

/// A node whose variant is known.
fn exactly(text: &str) -> NodePlatform {
    NodePlatform::exactly(&platform(text).normalized())
}

#[test]
fn every_spelling_of_an_architecture_is_its_runtime_name() {
    for (written, normal_form) in [
        ("linux/amd64", "linux/amd64"),
        ("linux/x86_64", "linux/amd64"),
        ("linux/x86-64", "linux/amd64"),
        ("linux/AMD64", "linux/amd64"),
        ("linux/386", "linux/386"),
        ("linux/i386", "linux/386"),
        ("linux/i686", "linux/386"),
        ("linux/arm64", "linux/arm64"),
        ("linux/aarch64", "linux/arm64"),
        ("linux/arm", "linux/arm/v7"),
        ("linux/armhf", "linux/arm/v7"),
        ("linux/armv7l", "linux/arm/v7"),
        ("linux/armv7", "linux/arm/v7"),
        ("linux/armel", "linux/arm/v6"),
        ("linux/armv6l", "linux/arm/v6"),
        ("linux/armv5tel", "linux/arm/v5"),
        ("linux/armv8l", "linux/arm/v8"),
        ("linux/ppc64le", "linux/ppc64le"),
        ("linux/ppc64el", "linux/ppc64le"),
        ("linux/mips64el", "linux/mips64le"),
        ("linux/mipsel", "linux/mipsle"),
        ("linux/loongarch64", "linux/loong64"),
        ("linux/riscv64", "linux/riscv64"),
        ("linux/s390x", "linux/s390x"),
    ] {
        assert_eq!(normal(written), normal_form, "{written}");
    }
}

#[test]
fn the_baseline_variant_is_no_variant_and_bare_numbers_are_levels() {
    for (written, normal_form) in [
        ("linux/amd64/v1", "linux/amd64"),
        ("linux/amd64/v3", "linux/amd64/v3"),
        ("linux/x86_64/v2", "linux/amd64/v2"),
        ("linux/arm64/v8", "linux/arm64"),
        ("linux/arm64/8", "linux/arm64"),
        ("linux/arm64/v8.0", "linux/arm64"),
        ("linux/aarch64/v8", "linux/arm64"),
        ("linux/arm64/v8.2", "linux/arm64/v8.2"),
        ("linux/arm64/9", "linux/arm64/v9"),
        ("linux/arm64/v9.0", "linux/arm64/v9"),
        ("linux/arm/7", "linux/arm/v7"),
        ("linux/arm/6", "linux/arm/v6"),
        ("linux/arm/v5", "linux/arm/v5"),
        ("linux/arm/V6", "linux/arm/v6"),
        ("linux/386/sse2", "linux/386"),
        ("linux/riscv64/rva22", "linux/riscv64/rva22"),
    ] {
        assert_eq!(normal(written), normal_form, "{written}");
    }
}

#[test]
fn the_spelling_of_an_architecture_decides_its_variant() {
    // armhf is ARMv7 whatever variant field sits beside it, as containerd reads it.
    assert_eq!(normal("linux/armhf/v6"), "linux/arm/v7");
    assert_eq!(normal("linux/armel/v7"), "linux/arm/v6");
}

#[test]
fn operating_systems_are_lower_case_and_macos_is_darwin() {
    assert_eq!(normal("Linux/amd64"), "linux/amd64");
    assert_eq!(normal("WINDOWS/amd64"), "windows/amd64");
    assert_eq!(normal("macos/arm64"), "darwin/arm64");
}

#[test]
fn aarch64_arm64_v8_and_arm64_are_one_platform_on_every_arm64_node() {
    let spellings = [
        "linux/aarch64",
        "linux/arm64/v8",
        "linux/arm64",
        "linux/aarch64/8",
    ];
    let normals: Vec<NormalPlatform> = spellings
        .iter()
        .map(|text| platform(text).normalized())
        .collect();
    assert!(
        normals.windows(2).all(|pair| pair[0] == pair[1]),
        "{normals:?}"
    );
    for node in [
        labelled("linux", "arm64"),
        labelled("linux", "aarch64"),
        exactly("linux/arm64"),
        exactly("linux/arm64/v8"),
    ] {
        for text in spellings {
            assert!(platform(text).runs_on(&node), "{text} on {node}");
        }
    }
    assert!(!platform("linux/aarch64").runs_on(&labelled("linux", "amd64")));
    assert!(!platform("linux/aarch64").runs_on(&labelled("linux", "arm")));
}

#[test]
fn a_node_of_unknown_variant_runs_any_variant_of_its_architecture() {
    for text in [
        "linux/arm/v5",
        "linux/arm/v6",
        "linux/arm",
        "linux/armhf",
        "linux/arm/v8",
    ] {
        assert!(platform(text).runs_on(&labelled("linux", "arm")), "{text}");
    }
    for text in ["linux/amd64/v4", "linux/x86_64/v2", "linux/arm64/v9"] {
        let arch = platform(text).normalized().os_arch.architecture;
        assert!(platform(text).runs_on(&labelled("linux", &arch)), "{text}");
    }
}

#[test]
fn a_node_of_known_variant_runs_its_level_and_lower_only() {
    assert!(platform("linux/arm/v6").runs_on(&exactly("linux/arm/v7")));
    assert!(platform("linux/armhf").runs_on(&exactly("linux/arm/v7")));
    assert!(!platform("linux/arm/v7").runs_on(&exactly("linux/arm/v6")));
    assert!(!platform("linux/arm").runs_on(&exactly("linux/armel")));
    assert!(platform("linux/amd64").runs_on(&exactly("linux/amd64/v3")));
    assert!(platform("linux/amd64/v1").runs_on(&exactly("linux/x86_64")));
    assert!(!platform("linux/amd64/v3").runs_on(&exactly("linux/amd64")));
    assert!(platform("linux/arm64/v8").runs_on(&exactly("linux/arm64/v8.2")));
    assert!(!platform("linux/arm64/v9").runs_on(&exactly("linux/aarch64")));
}

#[test]
fn os_and_architecture_must_both_match_and_an_unlabelled_field_does_not_constrain() {
    assert!(!platform("linux/amd64").runs_on(&labelled("windows", "amd64")));
    assert!(!platform("linux/amd64").runs_on(&labelled("linux", "s390x")));
    assert!(platform("Linux/x86_64").runs_on(&labelled("linux", "amd64")));
    let unlabelled = NodePlatform::from_labels(&BTreeMap::new());
    assert!(platform("plan9/s390x").runs_on(&unlabelled));
    let arch_only = NodePlatform::from_labels(&BTreeMap::from([(
        ARCH_LABEL.to_owned(),
        "arm64".to_owned(),
    )]));
    assert!(platform("windows/aarch64").runs_on(&arch_only));
    assert!(!platform("windows/amd64").runs_on(&arch_only));
    assert_eq!(arch_only.to_string(), "any/arm64");
    assert_eq!(labelled("Linux", "aarch64").to_string(), "linux/arm64");
}

#[test]
fn text_is_read_as_os_architecture_and_optional_variant() {
    assert_eq!(
        platform("linux/arm/v7"),
        Platform {
            os: "linux".into(),
            architecture: "arm".into(),
            variant: Some("v7".into()),
            os_version: None,
        }
    );
    assert_eq!(platform("linux/amd64").variant, None);
    for bad in [
        "",
        "linux",
        "linux/",
        "/amd64",
        "linux/arm/",
        "linux/arm/v7/extra",
    ] {
        assert!(bad.parse::<Platform>().is_err(), "{bad:?}");
    }
    assert_eq!(
        "unknown/unknown".parse::<Platform>(),
        Err(PlatformError::Unknown("os"))
    );
    assert_eq!(
        "linux/unknown".parse::<Platform>(),
        Err(PlatformError::Unknown("architecture"))
    );
}

#[test]
fn fields_that_are_not_short_printable_words_are_not_a_platform() {
    let long = "x".repeat(MAX_FIELD_CHARS + 1);
    let fits = "x".repeat(MAX_FIELD_CHARS);
    assert_eq!(
        Platform::new("linux", &long, None, None),
        Err(PlatformError::NotAWord("architecture"))
    );
    assert!(Platform::new("linux", &fits, None, None).is_ok());
    assert_eq!(
        Platform::new("linux\nevil", "amd64", None, None),
        Err(PlatformError::NotAWord("os"))
    );
    assert_eq!(
        Platform::new("linux", "arm", Some("v 7"), None),
        Err(PlatformError::NotAWord("variant"))
    );
    assert_eq!(
        Platform::new("windows", "amd64", None, Some("10.0\t1")),
        Err(PlatformError::NotAWord("os.version"))
    );
    let empty_optional = Platform::new("windows", "amd64", Some(""), Some("")).unwrap();
    assert_eq!(
        (empty_optional.variant, empty_optional.os_version),
        (None, None)
    );
}

#[test]
fn a_platform_prints_as_the_image_spells_it_with_the_os_version() {
    let windows = Platform::new("windows", "amd64", None, Some("10.0.20348.2113")).unwrap();
    assert_eq!(windows.to_string(), "windows/amd64 (10.0.20348.2113)");
    assert_eq!(platform("linux/aarch64/v8").to_string(), "linux/aarch64/v8");
}
