use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::exec::ExecError;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn basic_cred(u: &str, p: &str) -> Credential {
    Credential::Basic {
        username: u.into(),
        password: p.into(),
    }
}

fn creds(config: &DockerConfig, image: &str) -> Vec<Credential> {
    config
        .auth_candidates(image, "src")
        .into_iter()
        .map(|c| c.credential)
        .collect()
}

#[test]
fn parses_config_shapes() {
    let user_pass = b64("user:pa:ss");
    // (json, image, expected credentials)
    let cases: Vec<(String, &str, Vec<Credential>)> = vec![
        (
            format!(r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{user_pass}"}}}}}}"#),
            "docker.io/library/nginx:latest",
            vec![basic_cred("user", "pa:ss")],
        ),
        (
            // Unpadded base64 with line breaks (Go's decoder ignores them).
            format!(
                r#"{{"auths":{{"ghcr.io":{{"auth":"\r\n{}\n"}}}}}}"#,
                b64("ab:c").trim_end_matches('=')
            ),
            "ghcr.io/o/a:1",
            vec![basic_cred("ab", "c")],
        ),
        // Spaces are not base64: the entry is unusable, as for the kubelet.
        (
            format!(
                r#"{{"auths":{{"ghcr.io":{{"auth":" {} "}}}}}}"#,
                b64("ab:c")
            ),
            "ghcr.io/o/a:1",
            vec![],
        ),
        // Docker Hub's other names in an image mean docker.io.
        (
            format!(
                r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{}"}}}}}}"#,
                b64("hub:pw")
            ),
            "index.docker.io/library/nginx:1",
            vec![basic_cred("hub", "pw")],
        ),
        (
            r#"{"auths":{"ghcr.io":{"username":"u","password":"p","email":"x@y"}}}"#.into(),
            "ghcr.io/o/a:1",
            vec![basic_cred("u", "p")],
        ),
        (
            format!(
                r#"{{"auths":{{"ghcr.io":{{"auth":"{}","identitytoken":"refresh"}}}}}}"#,
                b64("u:")
            ),
            "ghcr.io/o/a:1",
            vec![Credential::IdentityToken("refresh".into())],
        ),
        (
            r#"{"auths":{"ghcr.io":{"registrytoken":"bearer"}}}"#.into(),
            "ghcr.io/o/a:1",
            vec![Credential::RegistryToken("bearer".into())],
        ),
        (
            r#"{"auths":{"ghcr.io":{"username":"<token>","password":"rt"}}}"#.into(),
            "ghcr.io/o/a:1",
            vec![Credential::IdentityToken("rt".into())],
        ),
        // Placeholder entries written when a credsStore is used carry nothing.
        (
            r#"{"auths":{"ghcr.io":{}},"credsStore":"desktop"}"#.into(),
            "ghcr.io/o/a:1",
            vec![],
        ),
        // Other registries do not match; the more specific path comes first.
        (
            format!(
                r#"{{"auths":{{"quay.io":{{"auth":"{}"}},"quay.io/team":{{"auth":"{}"}},"ghcr.io":{{"auth":"{}"}}}}}}"#,
                b64("all:1"),
                b64("team:2"),
                b64("gh:3")
            ),
            "quay.io/team/app:1",
            vec![basic_cred("team", "2"), basic_cred("all", "1")],
        ),
        // Legacy .dockercfg: a top-level map of registries.
        (
            format!(
                r#"{{"https://index.docker.io/v1/":{{"auth":"{}","email":"a@b"}}}}"#,
                b64("legacy:pw")
            ),
            "docker.io/u/app:1",
            vec![basic_cred("legacy", "pw")],
        ),
        (
            format!(r#"{{"127.0.0.1:5000":{{"auth":"{}"}}}}"#, b64("l:p")),
            "127.0.0.1:5000/app:1",
            vec![basic_cred("l", "p")],
        ),
        // Unrelated top-level keys of a config.json without auths.
        (
            r#"{"psFormat":"table","proxies":{"default":{"httpProxy":"x"}}}"#.into(),
            "docker.io/u/app:1",
            vec![],
        ),
        ("".into(), "docker.io/u/app:1", vec![]),
        ("  \n".into(), "docker.io/u/app:1", vec![]),
        ("{}".into(), "docker.io/u/app:1", vec![]),
    ];
    for (json, image, expected) in cases {
        let config = parse_docker_config(json.as_bytes()).unwrap();
        assert_eq!(creds(&config, image), expected, "{json}");
    }
}

#[test]
fn unusable_entries_are_skipped_by_key() {
    let json = format!(
        r#"{{"auths":{{"bad.io":{{"auth":"!!notbase64"}},"nocolon.io":{{"auth":"{}"}},"half.io":{{"username":"u"}},"str.io":"x","ok.io":{{"auth":"{}"}}}}}}"#,
        b64("nocolon"),
        b64("u:p")
    );
    let config = parse_docker_config(json.as_bytes()).unwrap();
    let mut skipped = config.skipped().to_vec();
    skipped.sort();
    assert_eq!(skipped, ["bad.io", "half.io", "nocolon.io", "str.io"]);
    assert_eq!(creds(&config, "ok.io/a"), vec![basic_cred("u", "p")]);
}

#[test]
fn malformed_configs_are_errors_without_content() {
    for json in [r#"{"auths": {"x": "#, "[1,2]", r#""secret""#, "hunter2"] {
        let err = parse_docker_config(json.as_bytes()).unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(
            !text.contains("hunter2") && !text.contains("secret"),
            "{text}"
        );
    }
}

#[test]
fn debug_does_not_print_secrets() {
    let json = format!(
        r#"{{"auths":{{"ghcr.io":{{"auth":"{}"}}}}}}"#,
        b64("u:hunter2")
    );
    let config = parse_docker_config(json.as_bytes()).unwrap();
    let printed = format!("{config:?} {:?}", config.auth_candidates("ghcr.io/a", "s"));
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(printed.contains("ghcr.io"));
}

#[test]
fn noe_default_paths() {
    let paths = default_paths_from(Some(Path::new("/dc")), Some(Path::new("/home/u")));
    let expected = [
        "/var/lib/kubelet/config.json",
        "/dc/config.json",
        "/home/u/.docker/config.json",
        "/.docker/config.json",
        "/var/lib/kubelet/.dockercfg",
        "/home/u/.dockercfg",
        "/.dockercfg",
    ];
    assert_eq!(
        paths,
        expected.iter().map(PathBuf::from).collect::<Vec<_>>()
    );
    // HOME=/ would repeat /.docker/config.json and /.dockercfg: each listed once.
    let paths = default_paths_from(None, Some(Path::new("/")));
    assert_eq!(paths.len(), 4, "{paths:?}");
}

fn write_helper(dir: &Path, name: &str, body: &str) {
    let path = dir.join(format!("docker-credential-{name}"));
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn helpers(dir: &Path) -> CredentialHelpers {
    CredentialHelpers::new(
        vec![dir.join("nonexistent"), dir.to_owned()],
        ExecLimits {
            timeout: Duration::from_millis(500),
            max_output: 4096,
        },
    )
}

/// A helper that answers for one server, records what it was asked, and says "not found" otherwise.
const RECORDING_HELPER: &str = r#"
[ "$1" = get ] || exit 2
read -r server || true
echo "$server" >> "$(dirname "$0")/asked"
case "$server" in
  https://index.docker.io/v1/) printf '{"ServerURL":"%s","Username":"hub","Secret":"hubpw"}' "$server" ;;
  ghcr.io) printf '{"ServerURL":"ghcr.io","Username":"<token>","Secret":"refresh-tok"}' ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac
"#;

#[tokio::test]
async fn credential_helpers_protocol() {
    let dir = tempfile::tempdir().unwrap();
    write_helper(dir.path(), "test", RECORDING_HELPER);
    write_helper(dir.path(), "hang", "exec sleep 30");
    write_helper(dir.path(), "garbage", "echo 'not json hunter2'");
    let helpers = helpers(dir.path());

    assert_eq!(
        helpers
            .get("test", "https://index.docker.io/v1/")
            .await
            .unwrap(),
        Some(basic_cred("hub", "hubpw"))
    );
    assert_eq!(
        helpers.get("test", "ghcr.io").await.unwrap(),
        Some(Credential::IdentityToken("refresh-tok".into()))
    );
    assert_eq!(helpers.get("test", "quay.io").await.unwrap(), None);
    // Cached: asking again does not run the helper.
    assert_eq!(helpers.get("test", "quay.io").await.unwrap(), None);
    let asked = std::fs::read_to_string(dir.path().join("asked")).unwrap();
    assert_eq!(asked, "https://index.docker.io/v1/\nghcr.io\nquay.io\n");

    let started = std::time::Instant::now();
    let err = helpers.get("hang", "ghcr.io").await.unwrap_err();
    assert!(matches!(
        err,
        HelperError::Exec {
            source: ExecError::Timeout { .. },
            ..
        }
    ));
    assert!(started.elapsed() < Duration::from_secs(5));

    let err = helpers.get("garbage", "ghcr.io").await.unwrap_err();
    assert!(matches!(err, HelperError::BadOutput { .. }));
    assert!(!format!("{err} {err:?}").contains("hunter2"));

    assert!(matches!(
        helpers.get("absent", "ghcr.io").await.unwrap_err(),
        HelperError::NotFound { .. }
    ));
    assert!(matches!(
        helpers.get("../../bin/sh", "ghcr.io").await.unwrap_err(),
        HelperError::InvalidName { .. }
    ));
}

#[tokio::test]
async fn source_reads_files_in_order_with_helpers() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    write_helper(&bin, "test", RECORDING_HELPER);
    write_helper(
        &bin,
        "store",
        r#"printf '{"Username":"store","Secret":"storepw"}'"#,
    );

    let first = dir.path().join("config.json");
    std::fs::write(
        &first,
        format!(
            r#"{{"auths":{{"ghcr.io":{{"auth":"{}"}}}},"credHelpers":{{"ghcr.io":"test"}},"credsStore":"store"}}"#,
            b64("file:pw")
        ),
    )
    .unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "").unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"auths\": hunter2").unwrap();
    let legacy = dir.path().join(".dockercfg");
    std::fs::write(
        &legacy,
        format!(r#"{{"ghcr.io":{{"auth":"{}"}}}}"#, b64("legacy:pw")),
    )
    .unwrap();

    let source = DockerConfigSource::new(
        vec![
            dir.path().join("missing.json"),
            empty,
            broken,
            first.clone(),
            legacy.clone(),
        ],
        helpers(&bin),
    );
    let candidates = source.candidates("ghcr.io/o/app:1").await;
    let got: Vec<(String, Credential)> = candidates
        .into_iter()
        .map(|c| (c.source, c.credential))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "docker-credential-helper:test".to_owned(),
                Credential::IdentityToken("refresh-tok".into())
            ),
            (
                format!("docker-config:{}", first.display()),
                basic_cred("file", "pw")
            ),
            // ghcr.io has a credHelper: credsStore is not asked (as with docker).
            (
                format!("docker-config:{}", legacy.display()),
                basic_cred("legacy", "pw")
            ),
        ]
    );

    // Docker Hub: the store is asked about https://index.docker.io/v1/.
    let hub = source.candidates("docker.io/library/nginx:latest").await;
    assert_eq!(
        hub.iter().map(|c| c.source.as_str()).collect::<Vec<_>>(),
        ["docker-credential-helper:store"]
    );
    // An unmatched registry gets only the store's answer.
    let other = source.candidates("quay.io/x/y:1").await;
    assert_eq!(other.len(), 1);
}

#[tokio::test]
async fn files_are_read_again_after_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.json");
    let clock = noe_core::clock::Clock::manual();
    let source = DockerConfigSource::with_reload_interval(
        vec![file.clone()],
        helpers(dir.path()),
        Duration::from_millis(200),
    )
    .with_clock(clock.clone());
    // Missing at first: no credentials.
    assert!(source.candidates("ghcr.io/a:1").await.is_empty());
    std::fs::write(
        &file,
        format!(
            r#"{{"auths":{{"ghcr.io":{{"auth":"{}"}}}}}}"#,
            b64("new:pw")
        ),
    )
    .unwrap();
    // Still the loaded view within the interval ...
    assert!(source.candidates("ghcr.io/a:1").await.is_empty());
    clock.advance(Duration::from_millis(200));
    // ... then the first read after it starts a reload in the background and gets the old view
    // at once; the file's content follows.
    assert!(source.candidates("ghcr.io/a:1").await.is_empty());
    // The clock keeps moving while we wait, as a real one would: the first load (of the
    // missing file) may still have been running when the clock was advanced above, and it
    // stamps its answer when it ends; without time passing, that stale answer would stand.
    let mut seen = Vec::new();
    for _ in 0..200 {
        seen = creds_of(&source.candidates("ghcr.io/a:1").await);
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        clock.advance(Duration::from_millis(200));
    }
    assert_eq!(seen, vec![basic_cred("new", "pw")]);
}

fn creds_of(candidates: &[CredentialCandidate]) -> Vec<Credential> {
    candidates.iter().map(|c| c.credential.clone()).collect()
}
