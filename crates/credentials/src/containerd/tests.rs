use std::time::Duration;

use base64::Engine as _;

use super::*;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn basic(u: &str, p: &str) -> Credential {
    Credential::Basic {
        username: u.into(),
        password: p.into(),
    }
}

/// (toml, expected auths, expected config_path)
type AuthCase = (String, Vec<(&'static str, Credential)>, Vec<&'static str>);

#[test]
fn cri_auth_shapes() {
    let cases: Vec<AuthCase> = vec![
        (
            // containerd 1.x, config version 2.
            r#"
version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d:/etc/docker/certs.d"
[plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io".auth]
  username = "_json_key"
  password = "pw"
[plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io".tls]
  insecure_skip_verify = true
"#
            .into(),
            vec![("gcr.io", basic("_json_key", "pw"))],
            vec!["/etc/containerd/certs.d", "/etc/docker/certs.d"],
        ),
        (
            // containerd 2.x.
            format!(
                r#"
version = 3
[plugins."io.containerd.cri.v1.images".registry]
  config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.cri.v1.images".registry.configs."127.0.0.1:5000".auth]
  auth = "{}"
[plugins."io.containerd.cri.v1.images".registry.configs."ghcr.io".auth]
  identitytoken = "refresh"
"#,
                b64("u:p")
            ),
            vec![
                ("127.0.0.1:5000", basic("u", "p")),
                ("ghcr.io", Credential::IdentityToken("refresh".into())),
            ],
            vec!["/etc/containerd/certs.d"],
        ),
        (
            // Config version 1.
            r#"
[plugins.cri.registry.configs."quay.io".auth]
  username = "q"
  password = "qp"
"#
            .into(),
            vec![("quay.io", basic("q", "qp"))],
            vec![],
        ),
        // Inline tables, other plugins, TLS-only entries.
        (
            r#"
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
[plugins."io.containerd.grpc.v1.cri".registry.configs]
  "a.io" = { auth = { username = "a", password = "b" } }
  "b.io" = { tls = { insecure_skip_verify = true } }
"#
            .into(),
            vec![("a.io", basic("a", "b"))],
            vec![],
        ),
        ("".into(), vec![], vec![]),
        ("version = 2\n".into(), vec![], vec![]),
    ];
    for (text, auths, config_path) in cases {
        let config = parse_containerd_config(&text).unwrap();
        let got: Vec<(&str, Credential)> = config
            .auths
            .iter()
            .map(|(h, c)| (h.as_str(), c.clone()))
            .collect();
        assert_eq!(got, auths, "{text}");
        assert_eq!(
            config.config_path,
            config_path.iter().map(PathBuf::from).collect::<Vec<_>>(),
            "{text}"
        );
    }
}

#[test]
fn unusable_and_malformed() {
    let config = parse_containerd_config(
        r#"
[plugins."io.containerd.grpc.v1.cri".registry.configs."bad.io".auth]
  auth = "!!!"
[plugins."io.containerd.grpc.v1.cri".registry.configs."half.io".auth]
  username = "only"
"#,
    )
    .unwrap();
    assert!(config.auths.is_empty());
    assert_eq!(config.skipped, ["bad.io", "half.io"]);
    let err = parse_containerd_config("password = hunter2").unwrap_err();
    assert!(!format!("{err} {err:?}").contains("hunter2"));
    let debug = format!(
        "{:?}",
        parse_containerd_config(
            "[plugins.cri.registry.configs.\"x.io\".auth]\nusername = \"u\"\npassword = \"hunter2\"\n"
        )
        .unwrap()
    );
    assert!(
        !debug.contains("hunter2") && debug.contains("x.io"),
        "{debug}"
    );
}

#[test]
fn hosts_toml_shapes() {
    let dir = Path::new("/etc/containerd/certs.d/docker.io");
    let hosts = HostsConfig::parse(
        "docker.io",
        r#"
server = "https://registry-1.docker.io"

[host."https://z-mirror.corp"]
  capabilities = ["pull", "resolve"]
  ca = "mirror-ca.pem"
  [host."https://z-mirror.corp".header]
    x-custom-2 = ["value1", "value2"]
    authorization = "Basic c2VjcmV0"

[host."http://a-mirror.corp:5000/prefix"]
  capabilities = ["pull"]
  skip_verify = true
  ca = ["/abs/one.pem", "two.pem"]

[host."b-mirror.corp/v2/proxy"]
  override_path = true
"#,
        dir,
    )
    .unwrap();
    let endpoints = hosts.endpoints();
    // File order, not alphabetical; the server last.
    let urls: Vec<&str> = endpoints.iter().map(|e| e.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://z-mirror.corp/",
            "http://a-mirror.corp:5000/prefix",
            "https://b-mirror.corp/v2/proxy",
            "https://registry-1.docker.io/",
        ]
    );
    let bases: Vec<String> = endpoints.iter().map(Endpoint::api_base).collect();
    assert_eq!(
        bases,
        [
            "https://z-mirror.corp/v2",
            "http://a-mirror.corp:5000/prefix/v2",
            "https://b-mirror.corp/v2/proxy",
            "https://registry-1.docker.io/v2",
        ]
    );
    assert_eq!(
        endpoints.iter().map(|e| e.mirror).collect::<Vec<_>>(),
        [true, true, true, false]
    );
    assert_eq!(endpoints[0].ca, [dir.join("mirror-ca.pem")]);
    assert_eq!(
        endpoints[0].headers,
        [
            (
                "x-custom-2".to_owned(),
                vec!["value1".to_owned(), "value2".to_owned()]
            ),
            (
                "authorization".to_owned(),
                vec!["Basic c2VjcmV0".to_owned()]
            ),
        ]
    );
    assert!(!format!("{hosts:?}").contains("c2VjcmV0"));
    assert_eq!(
        endpoints[1].ca,
        [PathBuf::from("/abs/one.pem"), dir.join("two.pem")]
    );
    assert!(endpoints[1].skip_verify && !endpoints[0].skip_verify);
    assert_eq!(endpoints[1].host(), "a-mirror.corp:5000");
    assert_eq!(
        endpoints[0].capabilities,
        Capabilities {
            resolve: true,
            pull: true,
            push: false
        }
    );
    assert_eq!(endpoints[2].capabilities, Capabilities::ALL);

    // Tags need `resolve`, digests need `pull`.
    // Credentials are looked up for the mirror's own host; the server keeps the image.
    assert_eq!(
        endpoints[1].credential_image("docker.io/library/nginx:1"),
        "a-mirror.corp:5000/library/nginx:1"
    );
    assert_eq!(
        endpoints[3].credential_image("docker.io/library/nginx:1"),
        "docker.io/library/nginx:1"
    );
    let by_tag: Vec<String> = hosts
        .endpoints_for(false)
        .iter()
        .map(|e| e.host())
        .collect();
    assert_eq!(
        by_tag,
        ["z-mirror.corp", "b-mirror.corp", "registry-1.docker.io"]
    );
    let by_digest: Vec<String> = hosts.endpoints_for(true).iter().map(|e| e.host()).collect();
    assert_eq!(
        by_digest,
        [
            "z-mirror.corp",
            "a-mirror.corp:5000",
            "b-mirror.corp",
            "registry-1.docker.io"
        ]
    );
}

#[test]
fn hosts_toml_defaults_and_errors() {
    // No server: https://HOST (registry-1.docker.io for Docker Hub); top-level keys apply to it.
    let hosts = HostsConfig::parse(
        "127.0.0.1:5000",
        "skip_verify = true\ncapabilities = [\"pull\"]\n",
        Path::new("/d"),
    )
    .unwrap();
    let server = hosts.server().unwrap();
    assert_eq!(server.url.as_str(), "https://127.0.0.1:5000/");
    assert!(server.skip_verify && !server.mirror);
    assert!(hosts.endpoints_for(false).is_empty());

    let hub = HostsConfig::parse("docker.io", "", Path::new("/d")).unwrap();
    assert_eq!(
        hub.endpoints()
            .iter()
            .map(|e| e.url.as_str())
            .collect::<Vec<_>>(),
        ["https://registry-1.docker.io/"]
    );
    assert_eq!(
        HostsConfig::default_for("quay.io").unwrap().endpoints()[0].api_base(),
        "https://quay.io/v2"
    );
    assert_eq!(
        default_server("index.docker.io"),
        "https://registry-1.docker.io"
    );

    assert_eq!(
        HostsConfig::parse("x.io", "server = ", Path::new("/d")),
        Err(HostsError::Malformed)
    );
    assert!(matches!(
        HostsConfig::parse("x.io", "server = \"ftp://x.io\"", Path::new("/d")),
        Err(HostsError::InvalidUrl { .. })
    ));
}

#[test]
fn hosts_toml_client_certificates_and_dial_timeout() {
    let dir = Path::new("/etc/containerd/certs.d/r.io");
    let hosts = HostsConfig::parse(
        "r.io",
        r#"
client = [["c.cert", "c.key"], ["both.pem", ""], "/abs/other.pem"]
dial_timeout = "1.5s"
[host."https://m.corp"]
  client = "m.pem"
"#,
        dir,
    )
    .unwrap();
    let pair = |cert: PathBuf, key: Option<PathBuf>| ClientCert { cert, key };
    assert_eq!(hosts.endpoints()[0].client, [pair(dir.join("m.pem"), None)]);
    assert_eq!(hosts.endpoints()[0].dial_timeout, None);
    let server = hosts.server().unwrap();
    assert_eq!(
        server.client,
        [
            pair(dir.join("c.cert"), Some(dir.join("c.key"))),
            pair(dir.join("both.pem"), None),
            pair(PathBuf::from("/abs/other.pem"), None),
        ]
    );
    assert_eq!(server.dial_timeout, Some(Duration::from_millis(1500)));
    // Parsing reads nothing; the files' contents come with load_hosts.
    assert!(server.tls_files.is_none());

    for bad in [
        "client = 5",
        "client = [5]",
        "client = [[\"a\", \"b\", \"c\"]]",
        "client = [[]]",
        "client = [[\"a\", 5]]",
    ] {
        assert_eq!(
            HostsConfig::parse("r.io", bad, dir),
            Err(HostsError::InvalidClient),
            "{bad}"
        );
    }
    assert!(matches!(
        HostsConfig::parse("r.io", "dial_timeout = \"soon\"", dir),
        Err(HostsError::InvalidDialTimeout { .. })
    ));
}

#[test]
fn load_hosts_reads_the_tls_files_it_names() {
    let tmp = tempfile::tempdir().unwrap();
    let host = tmp.path().join("r.io");
    write(&host.join("ca.pem"), "CA");
    write(&host.join("c.cert"), "CERT");
    write(&host.join("c.key"), "KEY");
    write(
        &host.join("hosts.toml"),
        "ca = \"ca.pem\"\nclient = [[\"c.cert\", \"c.key\"]]\n[host.\"https://m.corp\"]\n  client = \"missing.pem\"\n",
    );
    let hosts = load_hosts(&[tmp.path().to_owned()], "r.io")
        .unwrap()
        .unwrap();
    let server_files = hosts.server().unwrap().tls_files.clone().unwrap();
    assert_eq!(server_files.ca, [b"CA".to_vec()]);
    assert_eq!(server_files.client, [(b"CERT".to_vec(), b"KEY".to_vec())]);
    assert!(server_files.error.is_none());
    // A file that cannot be read makes its endpoint fail when used, naming the file.
    let mirror_files = hosts.endpoints()[0].tls_files.clone().unwrap();
    assert!(mirror_files
        .error
        .as_deref()
        .unwrap()
        .contains("missing.pem"));
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn source_reads_dirs_files_imports_and_certs_d() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("etc-containerd");
    let main = root.join("config.toml");
    write(
        &main,
        r#"
version = 2
imports = ["conf.d/*.toml", "missing.toml"]
[plugins."io.containerd.grpc.v1.cri".registry.configs."127.0.0.1:5000".auth]
  username = "main"
  password = "main-pw"
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry-1.docker.io".auth]
  username = "hub"
  password = "hub-pw"
"#,
    );
    // A drop-in overriding one host and adding another.
    write(
        &root.join("conf.d/10-override.toml"),
        r#"
[plugins."io.containerd.grpc.v1.cri".registry.configs."127.0.0.1:5000".auth]
  username = "dropin"
  password = "dropin-pw"
[plugins."io.containerd.grpc.v1.cri".registry.configs."ghcr.io".auth]
  identitytoken = "gh-refresh"
"#,
    );
    write(&root.join("conf.d/20-broken.toml"), "this is = = not toml");
    write(&root.join("conf.d/ignored.txt"), "not matched by the glob");
    // certs.d under the directory (no config_path set).
    write(
        &root.join("certs.d/127.0.0.1:5000/hosts.toml"),
        "server = \"http://127.0.0.1:5000\"\n[host.\"http://127.0.0.1:5001\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
    );
    write(
        &root.join("certs.d/_default/hosts.toml"),
        "[host.\"https://default-mirror.corp\"]\n",
    );
    // A second, separate config file with config_path pointing elsewhere.
    let other = tmp.path().join("other/config.toml");
    let other_certs = tmp.path().join("other-certs");
    write(
        &other,
        &format!(
            "version = 3\n[plugins.\"io.containerd.cri.v1.images\".registry]\n  config_path = \"{}\"\n[plugins.\"io.containerd.cri.v1.images\".registry.configs.\"quay.io\".auth]\n  auth = \"{}\"\n",
            other_certs.display(),
            b64("q:qp")
        ),
    );
    write(&other_certs.join("quay.io/ca.crt"), "pem");

    let source = ContainerdSource::new(vec![
        root.clone(),
        other.clone(),
        tmp.path().join("absent.toml"),
    ]);

    let local = source.candidates("127.0.0.1:5000/app:1").await;
    assert_eq!(local.len(), 1);
    assert_eq!(local[0].credential, basic("dropin", "dropin-pw"));
    assert_eq!(
        local[0].source,
        format!(
            "containerd:{}",
            root.join("conf.d/10-override.toml").display()
        )
    );
    assert!(source.candidates("127.0.0.1:5001/app:1").await.is_empty());

    let hub = source.candidates("docker.io/library/nginx:latest").await;
    assert_eq!(hub[0].credential, basic("hub", "hub-pw"));
    assert_eq!(hub[0].source, format!("containerd:{}", main.display()));

    assert_eq!(
        source.candidates("ghcr.io/o/a:1").await[0].credential,
        Credential::IdentityToken("gh-refresh".into())
    );
    let quay = source.candidates("quay.io/o/a:1").await;
    assert_eq!(quay[0].credential, basic("q", "qp"));
    assert_eq!(quay[0].source, format!("containerd:{}", other.display()));

    assert_eq!(
        source.host_roots().await,
        [root.join("certs.d"), other_certs.clone()]
    );
    let local_hosts = source.hosts("127.0.0.1:5000").await.unwrap();
    assert_eq!(
        local_hosts
            .endpoints()
            .iter()
            .map(|e| e.api_base())
            .collect::<Vec<_>>(),
        ["http://127.0.0.1:5001/v2", "http://127.0.0.1:5000/v2"]
    );
    // No directory of its own: _default applies, with the registry as server.
    let fallback = source.hosts("gcr.io").await.unwrap();
    assert_eq!(
        fallback
            .endpoints()
            .iter()
            .map(|e| e.url.as_str())
            .collect::<Vec<_>>(),
        ["https://default-mirror.corp/", "https://gcr.io/"]
    );
    // docker's certs.d layout: a directory with CA files and no hosts.toml.
    let quay_hosts = source.hosts("quay.io").await.unwrap();
    assert_eq!(
        quay_hosts.server().unwrap().ca,
        [other_certs.join("quay.io/ca.crt")]
    );
}

#[tokio::test]
async fn no_hosts_dirs_means_no_hosts_config() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("config.toml");
    write(&file, "");
    let source = ContainerdSource::new(vec![file]);
    assert!(source.hosts("docker.io").await.is_none());
    assert!(source
        .candidates("docker.io/library/nginx:1")
        .await
        .is_empty());
}

#[tokio::test]
async fn deprecated_cri_mirrors_without_config_path() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("config.toml");
    write(
        &file,
        r#"
version = 2
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["https://mirror.gcr.io", "http://10.0.0.1:5000"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."quay.io"]
  endpoint = ["https://quay.io", "https://quay-mirror.corp"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."*"]
  endpoint = ["https://catch-all.corp"]
"#,
    );
    let source = ContainerdSource::new(vec![file]);
    let urls = |hosts: HostsConfig| -> Vec<(String, bool)> {
        hosts
            .endpoints()
            .iter()
            .map(|e| (e.api_base(), e.mirror))
            .collect()
    };
    assert_eq!(
        urls(source.hosts("docker.io").await.unwrap()),
        [
            ("https://mirror.gcr.io/v2".to_owned(), true),
            ("http://10.0.0.1:5000/v2".to_owned(), true),
            ("https://registry-1.docker.io/v2".to_owned(), false),
        ]
    );
    // The server listed among the endpoints keeps its place.
    assert_eq!(
        urls(source.hosts("quay.io").await.unwrap()),
        [
            ("https://quay.io/v2".to_owned(), false),
            ("https://quay-mirror.corp/v2".to_owned(), true),
        ]
    );
    assert_eq!(
        urls(source.hosts("ghcr.io").await.unwrap()),
        [
            ("https://catch-all.corp/v2".to_owned(), true),
            ("https://ghcr.io/v2".to_owned(), false),
        ]
    );
}
