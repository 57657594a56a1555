use super::*;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// Shape of `docker buildx` output: two platforms plus their attestations.
const BUILDX_INDEX: &str = r#"{
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.index.v1+json",
  "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "size": 1,
     "platform": {"architecture": "amd64", "os": "linux"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "size": 1,
     "platform": {"architecture": "arm", "os": "linux", "variant": "v7"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc", "size": 1,
     "annotations": {"vnd.docker.reference.digest": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "vnd.docker.reference.type": "attestation-manifest"},
     "platform": {"architecture": "unknown", "os": "unknown"}}
  ]
}"#;

const DOCKER_LIST_BODY: &str = r#"{
  "schemaVersion": 2,
  "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
  "manifests": [
    {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "size": 1, "digest": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     "platform": {"architecture": "amd64", "os": "windows", "os.version": "10.0.17763.1"}},
    {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "size": 1, "digest": "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
     "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}}
  ]
}"#;

const DOCKER_MANIFEST_BODY: &str = r#"{
  "schemaVersion": 2,
  "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
  "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 7023,
             "digest": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
  "layers": []
}"#;

#[test]
fn index_entries_and_attestations() {
    let (media_type, parsed) = parse(Some(OCI_INDEX), BUILDX_INDEX.as_bytes()).unwrap();
    assert_eq!(media_type, OCI_INDEX);
    let Parsed::Index(entries) = parsed else {
        panic!("not an index")
    };
    let platforms: Vec<String> = entries
        .iter()
        .filter(|e| !e.is_attestation())
        .filter_map(|e| e.platform().unwrap())
        .map(|p| p.to_string())
        .collect();
    assert_eq!(platforms, ["linux/amd64", "linux/arm/v7"]);
    assert!(entries[2].is_attestation());
}

#[test]
fn attestation_by_annotation_alone() {
    let entry: Descriptor = serde_json::from_str(
        r#"{"digest":"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","annotations":{"vnd.docker.reference.type":"attestation-manifest"}}"#,
    )
    .unwrap();
    assert!(entry.is_attestation());
}

#[test]
fn media_type_from_header_then_body_then_shape() {
    // (content type, body, expected media type)
    let no_media_type_index = r#"{"schemaVersion":2,"manifests":[]}"#;
    let no_media_type_manifest = format!(r#"{{"schemaVersion":2,"config":{{"digest":"{A}"}}}}"#);
    let cases: Vec<(Option<&str>, &str, &str)> = vec![
        (Some(DOCKER_LIST), DOCKER_LIST_BODY, DOCKER_LIST),
        (Some("application/json"), DOCKER_LIST_BODY, DOCKER_LIST),
        (None, DOCKER_MANIFEST_BODY, DOCKER_MANIFEST),
        (
            Some("application/vnd.oci.image.index.v1+json; charset=utf-8"),
            no_media_type_index,
            OCI_INDEX,
        ),
        (Some("text/plain"), no_media_type_index, OCI_INDEX),
        (None, &no_media_type_manifest, OCI_MANIFEST),
    ];
    for (content_type, body, expected) in cases {
        let (media_type, _) = parse(content_type, body.as_bytes()).unwrap();
        assert_eq!(media_type, expected, "{content_type:?} {body}");
    }
}

#[test]
fn schema1_and_garbage_are_refused() {
    let schema1 =
        r#"{"schemaVersion":1,"name":"x","tag":"latest","architecture":"amd64","fsLayers":[]}"#;
    assert!(matches!(
        parse(None, schema1.as_bytes()),
        Err(ParseError::Unsupported(_))
    ));
    assert!(matches!(
        parse(
            Some("application/vnd.docker.distribution.manifest.v1+prettyjws"),
            schema1.as_bytes()
        ),
        Err(ParseError::Unsupported(_))
    ));
    assert!(matches!(
        parse(None, b"<html>oops</html>"),
        Err(ParseError::Invalid(_))
    ));
    assert!(matches!(parse(None, b"{}"), Err(ParseError::Invalid(_))));
    assert!(matches!(
        parse(Some(OCI_INDEX), br#"{"config":{"digest":"x"}}"#),
        Err(ParseError::Invalid(_))
    ));
}

#[test]
fn single_manifest_config() {
    let (_, parsed) = parse(Some(DOCKER_MANIFEST), DOCKER_MANIFEST_BODY.as_bytes()).unwrap();
    let Parsed::Image(config) = parsed else {
        panic!("not a manifest")
    };
    assert!(is_image_config(&config));
    assert_eq!(config.digest, A);
    let helm = Descriptor {
        media_type: Some("application/vnd.cncf.helm.config.v1+json".into()),
        ..config
    };
    assert!(!is_image_config(&helm));
}

#[test]
fn platforms_from_configs_never_default() {
    let cases: Vec<(&str, Option<&str>)> = vec![
        (
            r#"{"architecture":"arm64","os":"linux","variant":"v8","rootfs":{}}"#,
            Some("linux/arm64/v8"),
        ),
        (
            r#"{"architecture":"s390x","os":"linux"}"#,
            Some("linux/s390x"),
        ),
        (
            r#"{"architecture":"amd64","os":"windows","os.version":"10.0"}"#,
            Some("windows/amd64"),
        ),
        (r#"{"architecture":"riscv64"}"#, Some("riscv64")),
        (r#"{"os":"linux"}"#, None),
        (r#"{"architecture":""}"#, None),
        ("not json", None),
    ];
    for (body, expected) in cases {
        let got = platform_from_config(body.as_bytes())
            .ok()
            .map(|p| p.to_string());
        assert_eq!(got.as_deref(), expected, "{body}");
    }
}

#[test]
fn digests() {
    assert_eq!(
        digest_of(b"", None),
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert!(digest_of(b"", Some("sha512:00")).starts_with("sha512:cf83e135"));
}

#[test]
fn os_version_is_kept_from_index_entries_and_configs() {
    let (_, parsed) = parse(Some(DOCKER_LIST), DOCKER_LIST_BODY.as_bytes()).unwrap();
    let Parsed::Index(entries) = parsed else {
        panic!("not an index")
    };
    let windows = entries[0].platform().unwrap().unwrap();
    assert_eq!(windows.os_version.as_deref(), Some("10.0.17763.1"));
    assert_eq!(entries[1].platform().unwrap().unwrap().os_version, None);
    let config = platform_from_config(
        br#"{"architecture":"amd64","os":"windows","os.version":"10.0.20348.2227","os.features":["win32k"]}"#,
    )
    .unwrap();
    assert_eq!(config.os_version.as_deref(), Some("10.0.20348.2227"));
}

#[test]
fn artifacts_are_recognised() {
    let cases: Vec<(String, bool)> = vec![
        (
            format!(
                r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","artifactType":"application/vnd.example+type","config":{{"mediaType":"application/vnd.oci.empty.v1+json","digest":"{A}","size":2}}}}"#
            ),
            true,
        ),
        (
            format!(
                r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.cncf.helm.config.v1+json","digest":"{A}","size":2}}}}"#
            ),
            true,
        ),
        (
            format!(
                r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","artifactType":"","config":{{"mediaType":"{OCI_CONFIG}","digest":"{A}","size":2}}}}"#
            ),
            false,
        ),
        (DOCKER_MANIFEST_BODY.to_owned(), false),
    ];
    for (body, artifact) in cases {
        let (_, parsed) = parse(None, body.as_bytes()).unwrap();
        assert_eq!(parsed == Parsed::Artifact, artifact, "{body}");
    }
}

#[test]
fn hostile_platform_fields_are_invalid_not_kept() {
    let huge = "a".repeat(1 << 20);
    let index = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[{{"mediaType":"{OCI_MANIFEST}","digest":"{A}","platform":{{"os":"linux","architecture":"{huge}"}}}}]}}"#
    );
    let (_, parsed) = parse(None, index.as_bytes()).unwrap();
    let Parsed::Index(entries) = parsed else {
        panic!("not an index")
    };
    let Err(ParseError::Invalid(reason)) = entries[0].platform() else {
        panic!("accepted")
    };
    assert!(reason.len() < 100, "{reason}");
    let config = format!(r#"{{"architecture":"amd64","os":"linux","variant":"{huge}"}}"#);
    assert!(matches!(
        platform_from_config(config.as_bytes()),
        Err(ParseError::Invalid(_))
    ));
}
