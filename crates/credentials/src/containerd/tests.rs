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
    assert_eq!(
        source.host_source("gcr.io").await,
        HostSource::Dirs(vec![root.join("certs.d"), other_certs])
    );
}

#[tokio::test]
async fn no_hosts_dirs_means_no_hosts_config() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("config.toml");
    write(&file, "");
    let source = ContainerdSource::new(vec![file]);
    assert_eq!(source.host_source("docker.io").await, HostSource::None);
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
    let mirrors = |list: &[&str]| HostSource::Mirrors(list.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        source.host_source("docker.io").await,
        mirrors(&["https://mirror.gcr.io", "http://10.0.0.1:5000"])
    );
    assert_eq!(
        source.host_source("quay.io").await,
        mirrors(&["https://quay.io", "https://quay-mirror.corp"])
    );
    assert_eq!(
        source.host_source("ghcr.io").await,
        mirrors(&["https://catch-all.corp"])
    );
}
