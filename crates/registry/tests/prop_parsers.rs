//! Property tests for every parser that reads untrusted input: image references (from pod specs),
//! manifests and image configs (from registries), `WWW-Authenticate` (from registries), docker
//! config files and pull secrets (from users). Each runs a few hundred generated cases in the
//! normal `cargo test`: no input panics, errors name what was wrong, and round trips hold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use noe_credentials::docker_config::parse_docker_config;
use noe_registry::manifest::{self, Parsed};
use noe_registry::{challenge, Error, Reference};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;

/// Failures are turned into named regression tests by hand, not persisted files.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------- image references ----------

fn path_component() -> impl Strategy<Value = String> {
    // `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
    (
        "[a-z0-9]{1,8}",
        prop::collection::vec(("(\\.|_|__|-{1,3})", "[a-z0-9]{1,8}"), 0..3),
    )
        .prop_map(|(head, tail)| {
            let mut s = head;
            for (sep, part) in tail {
                s.push_str(&sep);
                s.push_str(&part);
            }
            s
        })
}

fn registry_host() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("docker.io".to_owned())),
        Just(Some("index.docker.io".to_owned())),
        Just(Some("localhost".to_owned())),
        Just(Some("localhost:5000".to_owned())),
        Just(Some("[::1]:5000".to_owned())),
        (
            "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?",
            "[a-z]{2,6}",
            prop::option::of(1u16..)
        )
            .prop_map(|(label, tld, port)| Some(match port {
                Some(port) => format!("{label}.{tld}:{port}"),
                None => format!("{label}.{tld}"),
            })),
    ]
}

fn valid_reference() -> impl Strategy<Value = String> {
    (
        registry_host(),
        prop::collection::vec(path_component(), 1..4),
        prop::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}"),
        prop::option::of("[0-9a-f]{64}"),
    )
        .prop_map(|(registry, path, tag, digest)| {
            let mut s = String::new();
            let mut path = path;
            match registry {
                Some(registry) => {
                    s.push_str(&registry);
                    s.push('/');
                }
                // Without a host, a first component with a `.` would be read as one.
                None => path[0] = path[0].replace('.', "-"),
            }
            s.push_str(&path.join("/"));
            if let Some(tag) = tag {
                s.push(':');
                s.push_str(&tag);
            }
            if let Some(digest) = digest {
                s.push_str("@sha256:");
                s.push_str(&digest);
            }
            s
        })
}

proptest! {
    #![proptest_config(config())]
    #[test]
    fn reference_parse_never_panics(input in "\\PC{0,80}") {
        match Reference::parse(&input) {
            Ok(reference) => {
                // Whatever parses normalizes to a fixed point.
                let again = Reference::parse(&reference.to_string()).unwrap();
                prop_assert_eq!(&again, &reference);
            }
            Err(Error::InvalidReference { reference, reason }) => {
                prop_assert_eq!(reference, input);
                prop_assert!(!reason.is_empty());
            }
            Err(other) => prop_assert!(false, "unexpected error kind: {other}"),
        }
    }

    #[test]
    fn reference_parse_never_panics_on_reference_alphabet(input in "[a-zA-Z0-9:/@._\\-\\[\\]]{0,60}") {
        if let Ok(reference) = Reference::parse(&input) {
            prop_assert_eq!(Reference::parse(&reference.to_string()).unwrap(), reference);
        }
    }

    #[test]
    fn valid_references_parse_and_round_trip(input in valid_reference()) {
        let reference = Reference::parse(&input)
            .map_err(|e| TestCaseError::fail(format!("{input}: {e}")))?;
        let normalized = reference.to_string();
        let again = Reference::parse(&normalized).unwrap();
        prop_assert_eq!(&again, &reference);
        prop_assert_eq!(again.to_string(), normalized.clone());
        // Normalization is total: a registry, a repository, and something to fetch.
        prop_assert!(!reference.registry.is_empty());
        prop_assert!(!reference.repository.is_empty());
        prop_assert!(reference.tag.is_some() || reference.digest.is_some());
        if input.contains('@') {
            prop_assert_eq!(reference.object(), reference.digest.as_deref().unwrap());
        }
        if reference.registry == "docker.io" {
            prop_assert!(reference.repository.contains('/'));
            prop_assert_eq!(reference.endpoint(), "registry-1.docker.io");
        }
    }

    #[test]
    fn upper_case_repositories_are_refused_with_a_reason(
        input in valid_reference(),
        upper in "[A-Z]",
        at in any::<prop::sample::Index>(),
    ) {
        let reference = Reference::parse(&input).unwrap();
        let mut repository = reference.repository.clone();
        let i = at.index(repository.len() + 1);
        prop_assume!(repository.is_char_boundary(i));
        repository.insert_str(i, &upper);
        let broken = format!("{}/{repository}:x", reference.registry);
        let error = Reference::parse(&broken).unwrap_err().to_string();
        prop_assert!(error.contains(&broken), "{}", error);
    }
}

// ---------- WWW-Authenticate ----------

fn quoted(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

proptest! {
    #![proptest_config(config())]
    #[test]
    fn challenge_parse_never_panics(input in "\\PC{0,120}") {
        let _ = challenge::parse_all(&input);
        let _ = challenge::parse([input.as_str()]);
    }

    #[test]
    fn challenge_parse_never_panics_on_header_alphabet(input in "[A-Za-z =,\"\\\\\t:/._-]{0,80}") {
        let all = challenge::parse_all(&input);
        for (scheme, params) in all {
            prop_assert!(!scheme.is_empty());
            for name in params.keys() {
                prop_assert_eq!(name.to_ascii_lowercase(), name.clone());
            }
        }
    }

    #[test]
    fn bearer_challenges_round_trip(
        realm in "https://[a-z.]{1,12}(:[0-9]{1,5})?/[ -~]{0,20}",
        service in prop::option::of("[ -~]{0,20}"),
        scope in prop::option::of("repository:[a-z/]{1,12}:pull(,push)?"),
        scheme in prop_oneof![Just("Bearer"), Just("bearer"), Just("BEARER")],
        sep in prop_oneof![Just(","), Just(", "), Just(" ,")],
        basic_first in any::<bool>(),
    ) {
        let mut header = format!("{scheme} realm={}", quoted(&realm));
        if let Some(service) = &service {
            header.push_str(sep);
            header.push_str(&format!("service={}", quoted(service)));
        }
        if let Some(scope) = &scope {
            header.push_str(sep);
            header.push_str(&format!("Scope={}", quoted(scope)));
        }
        if basic_first {
            header = format!("Basic realm=\"x\", {header}");
        }
        let parsed = challenge::parse([header.as_str()]);
        prop_assert_eq!(
            parsed,
            Some(challenge::Challenge::Bearer { realm, service, scope }),
            "{}", header
        );
    }
}

// ---------- manifests and image configs ----------

fn platform_json() -> impl Strategy<Value = serde_json::Value> {
    (
        prop_oneof![Just("linux"), Just("windows"), Just(""), Just("unknown")],
        prop_oneof![
            Just("amd64"),
            Just("arm64"),
            Just("arm"),
            Just("s390x"),
            Just(""),
            Just("unknown")
        ],
        prop::option::of(prop_oneof![Just("v7"), Just("v8"), Just("")]),
    )
        .prop_map(|(os, arch, variant)| {
            let mut p = serde_json::json!({"os": os, "architecture": arch});
            if let Some(v) = variant {
                p["variant"] = v.into();
            }
            p
        })
}

fn index_json() -> impl Strategy<Value = (serde_json::Value, usize)> {
    (
        prop::collection::vec(
            (
                prop::option::of(platform_json()),
                "[0-9a-f]{64}",
                any::<bool>(),
            ),
            0..8,
        ),
        prop::option::of(prop_oneof![
            Just(manifest::OCI_INDEX),
            Just(manifest::DOCKER_LIST)
        ]),
    )
        .prop_map(|(entries, media_type)| {
            let manifests: Vec<_> = entries
                .iter()
                .map(|(platform, hex, attestation)| {
                    let mut d = serde_json::json!({
                        "mediaType": manifest::OCI_MANIFEST,
                        "digest": format!("sha256:{hex}"),
                        "size": 100,
                    });
                    if let Some(p) = platform {
                        d["platform"] = p.clone();
                    }
                    if *attestation {
                        d["annotations"] = serde_json::json!({
                            "vnd.docker.reference.type": "attestation-manifest"
                        });
                    }
                    d
                })
                .collect();
            let mut index = serde_json::json!({"schemaVersion": 2, "manifests": manifests});
            if let Some(m) = media_type {
                index["mediaType"] = m.into();
            }
            (index, entries.len())
        })
}

proptest! {
    #![proptest_config(config())]
    #[test]
    fn manifest_parse_never_panics(
        body in prop::collection::vec(any::<u8>(), 0..256),
        content_type in prop::option::of("[ -~]{0,60}"),
    ) {
        let _ = manifest::parse(content_type.as_deref(), &body);
        let _ = manifest::platform_from_config(&body);
    }

    #[test]
    fn manifest_parse_never_panics_on_json_shapes(
        body in "\\{(\"(schemaVersion|mediaType|manifests|config|fsLayers|digest|platform)\":(1|2|\"x\"|\\[\\]|\\{\\}|null|\\[\\{\\}\\]),?){0,5}\\}",
    ) {
        match manifest::parse(None, body.as_bytes()) {
            Ok((media_type, _)) => prop_assert!(!media_type.is_empty()),
            Err(manifest::ParseError::Invalid(reason) | manifest::ParseError::Unsupported(reason)) => {
                prop_assert!(!reason.is_empty());
            }
        }
    }

    #[test]
    fn indexes_parse_to_all_their_entries(
        (index, n) in index_json(),
        content_type in prop::option::of(prop_oneof![
            Just(manifest::OCI_INDEX.to_owned()),
            Just(format!("{}; charset=utf-8", manifest::DOCKER_LIST)),
        ]),
    ) {
        let body = serde_json::to_vec(&index).unwrap();
        let (media_type, parsed) = manifest::parse(content_type.as_deref(), &body).unwrap();
        prop_assert!(manifest::is_index(&media_type), "{}", media_type);
        let Parsed::Index(entries) = parsed else {
            return Err(TestCaseError::fail("not an index"));
        };
        prop_assert_eq!(entries.len(), n);
        for (entry, json) in entries.iter().zip(index["manifests"].as_array().unwrap()) {
            prop_assert_eq!(entry.digest.as_str(), json["digest"].as_str().unwrap());
            let attestation = entry.is_attestation();
            let annotated = json.get("annotations").is_some();
            let unknown = json["platform"]["os"] == "unknown" && json["platform"]["architecture"] == "unknown";
            prop_assert_eq!(attestation, annotated || unknown);
            match entry.platform().unwrap() {
                Some(p) => {
                    prop_assert_eq!(p.architecture.as_str(), json["platform"]["architecture"].as_str().unwrap());
                    prop_assert!(!p.architecture.is_empty());
                    prop_assert!(p.variant.as_deref() != Some(""));
                }
                None => prop_assert!(json["platform"]["architecture"].as_str().unwrap_or("").is_empty()),
            }
        }
    }

    #[test]
    fn image_configs_round_trip(platform in platform_json(), extra in "[a-z]{0,10}") {
        let mut config = platform.clone();
        config["rootfs"] = serde_json::json!({"type": "layers", "diff_ids": []});
        // An unknown field; prefixed so it can never overwrite `os`, `architecture` or `variant`.
        config[format!("x-{extra}")] = serde_json::json!(1);
        let body = serde_json::to_vec(&config).unwrap();
        match manifest::platform_from_config(&body) {
            Ok(p) => {
                prop_assert_eq!(p.os.as_str(), platform["os"].as_str().unwrap());
                prop_assert_eq!(p.architecture.as_str(), platform["architecture"].as_str().unwrap());
                prop_assert_eq!(p.variant.as_deref(), platform.get("variant").and_then(|v| v.as_str()).filter(|v| !v.is_empty()));
            }
            Err(manifest::ParseError::Invalid(reason)) => {
                prop_assert_eq!(platform["architecture"].as_str(), Some(""));
                prop_assert!(reason.contains("architecture"));
            }
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn digest_of_matches_the_requested_algorithm(body in prop::collection::vec(any::<u8>(), 0..64), sha512 in any::<bool>()) {
        let like = sha512.then_some("sha512:00");
        let digest = manifest::digest_of(&body, like);
        let (algorithm, hex) = digest.split_once(':').unwrap();
        prop_assert_eq!(algorithm, if sha512 { "sha512" } else { "sha256" });
        prop_assert_eq!(hex.len(), if sha512 { 128 } else { 64 });
        // A digest we computed is one a reference accepts.
        let pinned = format!("r.io/a@{digest}");
        prop_assert!(Reference::parse(&pinned).is_ok());
    }
}

// ---------- docker config files and pull secrets ----------

fn auth_entry() -> impl Strategy<Value = (serde_json::Value, Option<String>)> {
    // (entry, secret that must never show in Debug/errors)
    prop_oneof![
        ("[a-z]{1,8}", "[A-Za-z0-9]{8,16}").prop_map(|(u, p)| {
            let auth = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            (serde_json::json!({ "auth": auth }), Some(p))
        }),
        ("[a-z]{1,8}", "[A-Za-z0-9]{8,16}").prop_map(|(u, p)| (
            serde_json::json!({"username": u, "password": p.clone()}),
            Some(p)
        )),
        "[A-Za-z0-9]{12,20}"
            .prop_map(|t| (serde_json::json!({ "identitytoken": t.clone() }), Some(t))),
        Just((serde_json::json!({"auth": "%%%not base64"}), None)),
        Just((serde_json::json!({}), None)),
        Just((serde_json::json!("not an object"), None)),
    ]
}

proptest! {
    #![proptest_config(config())]
    #[test]
    fn docker_config_parse_never_panics(body in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Err(error) = parse_docker_config(&body) {
            // Errors never carry the file's content.
            let text = error.to_string();
            prop_assert!(text.starts_with("docker config"), "{}", text);
        }
    }

    #[test]
    fn docker_config_parse_never_panics_on_json_shapes(
        body in "\\{(\"(auths|credsStore|credHelpers|auth|username|password|identitytoken|r\\.io)\":(\"\"|\"x\"|1|null|\\[\\]|\\{\\}|\\{\"a\":\\{\\}\\}|\\{\"b\":\"c\"\\}),?){0,5}\\}",
    ) {
        let _ = parse_docker_config(body.as_bytes());
    }

    #[test]
    fn docker_configs_keep_usable_entries_and_hide_secrets(
        entries in prop::collection::btree_map("[a-z]{1,6}\\.io(:[0-9]{2,4})?", auth_entry(), 0..6),
        modern in any::<bool>(),
    ) {
        let map: serde_json::Map<_, _> = entries.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect();
        let body = if modern {
            serde_json::json!({ "auths": map })
        } else {
            serde_json::Value::Object(map)
        };
        let config = parse_docker_config(&serde_json::to_vec(&body).unwrap()).unwrap();
        let usable: Vec<&str> = entries.iter().filter(|(_, (_, s))| s.is_some()).map(|(k, _)| k.as_str()).collect();
        let keys: Vec<&str> = config.auth_keys().collect();
        prop_assert_eq!(keys, usable);
        let debug = format!("{config:?}");
        for (_, secret) in entries.values() {
            if let Some(secret) = secret {
                prop_assert!(!debug.contains(secret.as_str()), "{}", debug);
            }
        }
        if modern {
            // Unusable entries of a config.json are reported by key.
            for (key, (value, secret)) in &entries {
                let unusable = secret.is_none() && value != &serde_json::json!({});
                prop_assert_eq!(config.skipped().contains(key), unusable, "{}", key);
            }
        }
    }
}
