use super::*;

fn reference(image: &str) -> Reference {
    Reference::parse(image).unwrap()
}

#[test]
fn first_matching_entry_wins() {
    let overrides = Overrides::parse(
        "- images: [\"registry.internal.corp/team\", \"docker.io/library/busybox:1.36\"]\n  platforms: [linux/arm64/v8, linux/amd64, linux/amd64]\n- images: [\"*.internal.corp\"]\n  platforms: [\"*\"]\n",
    )
    .unwrap();
    assert_eq!(overrides.len(), 2);
    let found = overrides
        .find(&reference("registry.internal.corp/team/app:1"))
        .unwrap();
    assert_eq!(found.entry, 1);
    assert_eq!(found.pattern, "registry.internal.corp/team");
    let shown: Vec<String> = found.platforms.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["linux/amd64", "linux/arm64/v8"]);
    // Normalized before matching: `busybox:1.36` is docker.io/library/busybox:1.36.
    assert_eq!(overrides.find(&reference("busybox:1.36")).unwrap().entry, 1);
    assert!(overrides.find(&reference("busybox:1.37")).is_none());
    let any = overrides
        .find(&reference("registry.internal.corp/other/app"))
        .unwrap();
    assert_eq!(any.entry, 2);
    assert!(any.platforms[0].is_any());
    assert_eq!(any.platforms[0].to_string(), "*");
    // A glob never spans a dot; ports must match.
    assert!(overrides
        .find(&reference("a.b.internal.corp/app"))
        .is_none());
    assert!(overrides
        .find(&reference("registry.internal.corp:5000/team/app"))
        .is_none());
    let resolution = any.resolution(&reference("registry.internal.corp/other/app"));
    assert_eq!(resolution.image, "registry.internal.corp/other/app:latest");
    assert!(resolution.digest.is_empty() && resolution.credential_source.is_none());
    assert!(Overrides::parse("").unwrap().is_empty());
    assert!(Overrides::parse("[]").unwrap().is_empty());
}

#[test]
fn invalid_files_name_the_entry() {
    let ok = "- {images: [a.io/x], platforms: [linux/amd64]}\n";
    let cases: &[(String, &str)] = &[
        ("{a: b}".into(), "not a YAML list"),
        (
            format!("{ok}- {{images: [], platforms: [linux/amd64]}}"),
            "entry 2: images is empty",
        ),
        (
            format!("{ok}- {{images: [a.io], platforms: []}}"),
            "entry 2: platforms is empty",
        ),
        (
            "- {images: [a.io], platforms: [amd64]}".into(),
            "entry 1: platform \"amd64\" is not os/arch",
        ),
        (
            "- {images: [a.io], platforms: [linux/amd64/v1/x]}".into(),
            "is not os/arch",
        ),
        (
            "- {images: [a.io], platforms: [\"linux/x y\"]}".into(),
            "entry 1: platform \"linux/x y\": platform field architecture",
        ),
        (
            "- {images: [a.io], platforms: [\"*\", linux/amd64]}".into(),
            "stands alone",
        ),
        (
            "- {images: [\"a b\"], platforms: [\"*\"]}".into(),
            "is not a kubelet matchImages pattern",
        ),
        (
            "- {images: [\"a[.io\"], platforms: [\"*\"]}".into(),
            "is not a kubelet matchImages pattern",
        ),
        (
            format!("- {{images: [{}], platforms: [\"*\"]}}", "a".repeat(256)),
            "is not a kubelet",
        ),
        (
            "- {images: [a.io], platforms: [\"*\"], extra: 1}".into(),
            "entry 1: unknown field `extra`",
        ),
        (
            "- {images: [a.io]}".into(),
            "entry 1: missing field `platforms`",
        ),
    ];
    for (text, want) in cases {
        let error = Overrides::parse(text).unwrap_err().to_string();
        assert!(error.contains(want), "{text:?}: {error}");
    }
    let many = "- {images: [a.io], platforms: [\"*\"]}\n".repeat(MAX_ENTRIES + 1);
    assert_eq!(
        Overrides::parse(&many).unwrap_err(),
        Invalid::TooManyEntries(MAX_ENTRIES + 1)
    );
    let patterns: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("r{i}.io")).collect();
    let text = format!("- {{images: [{}], platforms: [\"*\"]}}", patterns.join(","));
    assert!(Overrides::parse(&text)
        .unwrap_err()
        .to_string()
        .contains("image patterns"));
}

#[test]
fn a_tag_or_a_digest_matches_exactly_and_a_glob_in_the_path_is_refused() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let overrides = Overrides::parse(&format!(
        "- {{images: [\"docker.io/library/busybox:1.3\"], platforms: [linux/amd64]}}\n- {{images: [\"a.io/app@{digest}\"], platforms: [linux/arm64]}}\n- {{images: [a.io/team], platforms: [linux/s390x]}}\n"
    ))
    .unwrap();
    let entry = |image: &str| overrides.find(&reference(image)).map(|m| m.entry);
    assert_eq!(entry("busybox:1.3"), Some(1));
    assert_eq!(entry(&format!("busybox:1.3@{digest}")), Some(1));
    assert_eq!(entry("busybox:1.36"), None);
    assert_eq!(entry("busybox:1.3-evil"), None);
    assert_eq!(entry(&format!("a.io/app@{digest}")), Some(2));
    assert_eq!(
        entry(&format!("a.io/app@sha256:{}", "ab".repeat(31) + "cd")),
        None
    );
    // Without a tag or digest, the path stays a prefix.
    assert_eq!(entry("a.io/team/app:1"), Some(3));

    for pattern in [
        "registry.internal.corp/*",
        "127.0.0.1:5000/glob/*",
        "a.io/te?m",
    ] {
        let text = format!("- {{images: [\"{pattern}\"], platforms: [\"*\"]}}");
        let error = Overrides::parse(&text).unwrap_err().to_string();
        assert!(
            error.contains("entry 1") && error.contains("glob in its path"),
            "{pattern}: {error}"
        );
    }
}

#[tokio::test]
async fn an_emptied_file_keeps_the_last_good_version_unless_it_started_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overrides.yaml");
    std::fs::write(&path, "- {images: [a.io/x], platforms: [linux/amd64]}\n").unwrap();
    let overrides = PlatformOverrides::load(&path, Duration::ZERO).unwrap();
    let image = reference("a.io/x:1");
    assert!(overrides.find(&image).await.is_some());
    std::fs::write(&path, "").unwrap();
    let failed = || overrides.failures().with_label_values(&["empty"]).get();
    for _ in 0..200 {
        assert!(
            overrides.find(&image).await.is_some(),
            "the override was dropped"
        );
        if failed() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(failed() > 0, "the emptied file was not counted");
    assert!(overrides.find(&image).await.is_some());

    // Empty at start: no override, and filling it later is read.
    let empty = PlatformOverrides::load(&path, Duration::ZERO).unwrap();
    assert!(empty.find(&image).await.is_none());
    std::fs::write(&path, "- {images: [a.io/x], platforms: [linux/amd64]}\n").unwrap();
    let mut seen = false;
    for _ in 0..200 {
        if empty.find(&image).await.is_some() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(seen);
}

#[tokio::test]
async fn reloaded_when_the_file_changes_and_the_last_good_version_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overrides.yaml");
    std::fs::write(&path, "- {images: [a.io/x], platforms: [linux/amd64]}\n").unwrap();
    let overrides = PlatformOverrides::load(&path, Duration::ZERO).unwrap();
    let image = reference("a.io/x:1");
    let arch = |m: Option<Matched>| m.map(|m| m.platforms[0].architecture.clone());
    assert_eq!(arch(overrides.find(&image).await).as_deref(), Some("amd64"));
    std::fs::write(&path, "- {images: [a.io/x], platforms: [linux/arm64]}\n").unwrap();
    let mut seen = None;
    for _ in 0..200 {
        seen = arch(overrides.find(&image).await);
        if seen.as_deref() == Some("arm64") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(seen.as_deref(), Some("arm64"), "the new version is read");
    // An invalid version is refused: the last good one stays.
    std::fs::write(&path, "- {images: [a.io/x], platforms: [arm64]}\n").unwrap();
    for _ in 0..20 {
        assert_eq!(arch(overrides.find(&image).await).as_deref(), Some("arm64"));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // At start, an invalid or missing file is an error naming it.
    let error = PlatformOverrides::load(&path, Duration::ZERO).unwrap_err();
    assert_eq!(error.kind(), "invalid");
    assert!(error.to_string().contains("entry 1"), "{error}");
    let missing = PlatformOverrides::load(&dir.path().join("none"), Duration::ZERO).unwrap_err();
    assert_eq!(missing.kind(), "missing");
}
