use std::path::Path;

use super::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
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
